"""The model registry: a TOML file naming every model an experiment may use.

::

    [models.qwen-local]
    provider = "openai"                      # openai | anthropic | replay
    base_url = "http://localhost:8000/v1"    # vLLM, Ollama, SGLang ...: any chat-completions endpoint
    model = "Qwen/Qwen3-Coder"
    temperature = 0.8
    price = { input = 0.0, cached = 0.0, output = 0.0 }   # US dollars per million tokens

    [models.claude]
    provider = "anthropic"
    model = "claude-sonnet-4-5"
    api_key_env = "ANTHROPIC_API_KEY"
    price = { input = 3.0, cached = 0.3, output = 15.0 }

    [models.replayed]
    provider = "replay"
    replay_file = "runs/claude.jsonl"        # relative to this file

``api_key_env`` names the environment variable holding the key; the key itself never goes in the file. Left out,
a model with a ``base_url`` (a local server) gets a dummy key, and one without uses the provider's usual variable
(``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``). ``extra`` is merged into the request body as is (``top_k``,
``chat_template_kwargs``, ``thinking`` ...).
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from solbench.agents.types import Price
from solbench.errors import UserError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    try:
        import tomli as tomllib
    except ModuleNotFoundError:
        tomllib = None

PROVIDERS = ("openai", "anthropic", "replay")


class ModelConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    name: str  # the key under [models]
    provider: Literal["openai", "anthropic", "replay"]
    model: str = ""  # the endpoint's model id; needed by every provider but replay
    base_url: str | None = None
    api_key_env: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = Field(default=None, gt=0)
    timeout_s: float = Field(default=600.0, gt=0)
    max_retries: int = Field(default=6, ge=0)
    price: Price = Field(default_factory=Price)
    replay_file: str | None = None
    extra: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _complete(self) -> "ModelConfig":
        if self.provider == "replay":
            if not self.replay_file:
                raise ValueError("provider 'replay' needs replay_file = \"<trajectory.jsonl>\"")
        elif not self.model:
            raise ValueError(f"provider {self.provider!r} needs model = \"<the endpoint's model id>\"")
        return self


def _one_line(e: ValidationError) -> str:
    parts = []
    for err in e.errors():
        loc = ".".join(str(x) for x in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "literal_error":
            msg = f"{err.get('input')!r} is not one of {', '.join(PROVIDERS)}"
        elif err["type"] == "extra_forbidden":
            msg = "unknown setting"
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)


def load_models(path: str | Path) -> dict[str, ModelConfig]:
    """Every model in a registry file, by name. A relative ``replay_file`` is taken from the file's folder."""
    path = Path(path)
    if tomllib is None:  # pragma: no cover
        raise UserError("reading a model registry on Python 3.10 needs tomli: pip install tomli")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"model registry {path} not found: copy docs/examples/models.toml there, or pass --models "
                        "with a file of your own (docs/AGENTS.md)") from None
    except OSError as e:
        raise UserError(f"cannot read model registry {path}: {e.strerror or e}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"model registry {path} is not valid TOML: {e}") from None
    table = data.get("models")
    if not isinstance(table, dict) or not table:
        raise UserError(f"model registry {path} has no [models.<name>] tables")
    out: dict[str, ModelConfig] = {}
    for name, body in table.items():
        if not isinstance(body, dict):
            raise UserError(f"{path}: models.{name} must be a table ([models.{name}])")
        if "provider" not in body:
            raise UserError(f"{path}: [models.{name}] needs provider = one of {', '.join(PROVIDERS)}")
        try:
            cfg = ModelConfig(name=name, **{k: v for k, v in body.items() if k != "name"})
        except ValidationError as e:
            raise UserError(f"{path}: [models.{name}] {_one_line(e)}") from None
        if cfg.replay_file and not Path(cfg.replay_file).is_absolute():
            cfg = cfg.model_copy(update={"replay_file": str(path.parent / cfg.replay_file)})
        out[name] = cfg
    return out


def get_model(models: dict[str, ModelConfig], name: str, source: str | Path | None = None) -> ModelConfig:
    """One model by name; an unknown name is the user's error, and the message lists the known ones."""
    try:
        return models[name]
    except KeyError:
        where = f" in {source}" if source else ""
        known = ", ".join(sorted(models)) or "none"
        raise UserError(f"unknown model {name!r}{where} (known: {known})") from None


def load_model(path: str | Path, name: str) -> ModelConfig:
    """``get_model(load_models(path), name)``."""
    return get_model(load_models(path), name, path)
