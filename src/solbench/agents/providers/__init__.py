"""Model providers: one ``Provider`` (see ``solbench.agents.types``) per registry entry.

``make_provider(cfg)`` builds the provider a :class:`~solbench.agents.models.ModelConfig` names. The SDKs
(``openai``, ``anthropic``) are imported only when a provider needing them is built, so solbench imports without
them; a missing one is a :class:`ProviderError` saying what to install.
"""
from __future__ import annotations

import importlib
import os
from typing import Any

from solbench.agents.models import ModelConfig
from solbench.agents.providers.retry import CallFailure, ProviderError, RetryPolicy, call_with_retries
from solbench.agents.types import Provider

__all__ = ["make_provider", "ProviderError", "RetryPolicy", "CallFailure", "call_with_retries"]

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


def make_provider(cfg: ModelConfig, *, problem: str | None = None, policy: RetryPolicy | None = None) -> Provider:
    """The provider for ``cfg``. ``problem`` filters a replay file's records; ``policy`` overrides the retry
    back-off (``max_retries`` comes from ``cfg`` unless a policy is given)."""
    if cfg.provider == "replay":
        from solbench.agents.providers.replay import ReplayProvider

        return ReplayProvider(cfg.replay_file or "", name=cfg.name, problem=problem)
    policy = policy or RetryPolicy(max_retries=cfg.max_retries)
    if cfg.provider == "openai":
        from solbench.agents.providers.openai_chat import OpenAIChatProvider

        return OpenAIChatProvider(cfg, policy=policy)
    if cfg.provider == "anthropic":
        from solbench.agents.providers.anthropic_messages import AnthropicMessagesProvider

        return AnthropicMessagesProvider(cfg, policy=policy)
    raise ProviderError(f"model {cfg.name!r}: unknown provider {cfg.provider!r} (openai, anthropic, replay)")
