"""Model providers: one ``Provider`` (see ``solbench.agents.types``) per registry entry.

``make_provider(cfg)`` builds the provider a :class:`~solbench.agents.models.ModelConfig` names. The SDKs
(``openai``, ``anthropic``) are imported only when a provider needing them is built, so solbench imports without
them; a missing one is a :class:`ProviderError` saying what to install.
"""
from __future__ import annotations

from solbench.agents.models import ModelConfig
from solbench.agents.providers.retry import CallFailure, ProviderError, RetryPolicy, call_with_retries
from solbench.agents.types import Provider

__all__ = ["make_provider", "ProviderError", "RetryPolicy", "CallFailure", "call_with_retries"]


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
