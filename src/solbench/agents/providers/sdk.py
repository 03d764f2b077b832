"""What the two SDK providers share: the client's construction, one call through the SDK with its errors
classified for the retry policy, retries, latency. Each subclass says which SDK and client, builds the
request and reads the reply."""
from __future__ import annotations

import time
from typing import Any

from solbench.agents.models import ModelConfig
from solbench.agents.providers.keys import api_key, import_sdk
from solbench.agents.providers.retry import ProviderError, RetryPolicy, call_with_retries, failure_from_sdk, one_line
from solbench.agents.types import Message, Reply, Tool


def field(obj: Any, name: str) -> Any:
    """``obj[name]`` or ``obj.name``: SDK objects and plain dicts alike."""
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


class SDKProvider:
    """A provider over an official SDK client. ``calls`` counts the HTTP requests made, retries included."""

    sdk_module = ""  # "openai" | "anthropic"
    client_class = ""  # the SDK's client class
    default_where = ""  # how an error names the endpoint when no base_url is set
    not_json_hint = ""  # what to check when the endpoint answers something that is not JSON

    def __init__(self, cfg: ModelConfig, policy: RetryPolicy | None = None):
        self.cfg = cfg
        self.name = cfg.name
        self.policy = policy or RetryPolicy(max_retries=cfg.max_retries)
        self.calls = 0
        self.on_retry = None  # optional fn(CallFailure, wait_s), called before each back-off (for logging)
        self._sdk = import_sdk(self.sdk_module, cfg.name)
        key, self.key_env = api_key(cfg)
        self.where = cfg.base_url or self.default_where
        kw: dict[str, Any] = {"api_key": key, "timeout": cfg.timeout_s, "max_retries": 0}
        if cfg.base_url:
            kw["base_url"] = cfg.base_url
        self.client = getattr(self._sdk, self.client_class)(**kw)

    def request(self, messages: list[Message], tools: list[Tool] | None = None) -> dict[str, Any]:
        raise NotImplementedError

    def create(self, kw: dict[str, Any]) -> Any:
        """The SDK call itself."""
        raise NotImplementedError

    def reply_from(self, resp: Any, latency: float = 0.0) -> Reply:
        raise NotImplementedError

    def _once(self, kw: dict[str, Any]) -> Any:
        self.calls += 1
        try:
            resp = self.create(kw)
        except self._sdk.APIError as e:
            failure = failure_from_sdk(e, self._sdk)
            if failure is None:  # a response the SDK could not read
                raise ProviderError(one_line(f"model {self.name!r}: unreadable response from {self.where}: {e}; "
                                             f"check that base_url speaks this protocol")) from None
            raise failure from None
        if not hasattr(resp, "model_dump"):  # a 200 that is not JSON: some other server at that address
            raise ProviderError(one_line(f"model {self.name!r}: {self.where} did not answer JSON "
                                         f"({str(resp)[:60]!r}); {self.not_json_hint}"))
        return resp

    def complete(self, messages: list[Message], tools: list[Tool] | None = None) -> Reply:
        kw = self.request(messages, tools)
        t0 = time.monotonic()
        resp = call_with_retries(lambda: self._once(kw), self.policy, model=self.name, where=self.where,
                                 key_env=self.key_env, on_retry=self.on_retry)
        return self.reply_from(resp, time.monotonic() - t0)

    @staticmethod
    def raw_of(resp: Any) -> dict[str, Any]:
        return resp.model_dump(mode="json", exclude_none=True) if hasattr(resp, "model_dump") else dict(resp)
