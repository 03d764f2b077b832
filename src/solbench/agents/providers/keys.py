"""A provider's SDK and API key: imported and read only when a provider that needs them is built."""

from __future__ import annotations

import importlib
import os
from typing import Any

from solbench.agents.models import ModelConfig
from solbench.agents.providers.retry import ProviderError

#: what a local endpoint (vLLM, Ollama ...) gets as its key when the registry names none
DUMMY_KEY = "not-needed"
DEFAULT_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


def import_sdk(module: str, model: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ProviderError(f"model {model!r} needs the {module!r} package: pip install 'solbench[agents]'") from None


def api_key(cfg: ModelConfig) -> tuple[str, str | None]:
    """The key to send and the variable it came from. A local endpoint with no ``api_key_env`` gets a dummy key."""
    env = cfg.api_key_env
    if env is None:
        if cfg.base_url:
            return DUMMY_KEY, None
        env = DEFAULT_KEY_ENV[cfg.provider]
    key = os.environ.get(env, "").strip()
    if not key:
        raise ProviderError(f"model {cfg.name!r} needs an API key in ${env}, which is not set: export {env}=... "
                            f"(or set api_key_env in the model registry)")
    return key, env
