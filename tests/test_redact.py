"""Secrets never reach transcripts or verdicts: env values and token shapes are redacted."""

from __future__ import annotations

import json

import pytest

from kernelpilot.redact import REDACTED, is_secret_name, redact, redact_obj
from kernelpilot.verdict import Finding, Verdict


def test_values_of_secret_env_vars_are_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SERVICE_API_KEY", "zq81-plain-looking-value")
    monkeypatch.setenv("CI_JOB_TOKEN", "another-plain-value-77")
    monkeypatch.setenv("DEBUG_PASSWORD", "hunter2hunter2")
    monkeypatch.setenv("SHORT_TOKEN", "1")  # too short to redact by value
    text = "key zq81-plain-looking-value, token another-plain-value-77, pw hunter2hunter2, 1 item"
    out = redact(text)
    assert "zq81" not in out and "another-plain" not in out and "hunter2" not in out
    assert out.count(REDACTED) == 3 and out.endswith("1 item")


@pytest.mark.parametrize("secret", [
    "sk-proj-AbCdEf0123456789AbCdEf0123456789",
    "sk-ant-api03-AbCdEf0123456789_AbCdEf-0123456789",
    "ghp_AbCdEf0123456789AbCdEf0123456789abcd",
    "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    "AKIAIOSFODNN7EXAMPLE",
    "xoxb-123456789012-abcdefghijkl",
    "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567",
])
def test_token_shapes_are_redacted(secret: str) -> None:
    out = redact(f"the model printed {secret} in a log")
    assert secret not in out and out == f"the model printed {REDACTED} in a log"


def test_bearer_headers_assignments_and_private_keys() -> None:
    text = ("Authorization: Bearer abc.DEF-123_456.xyz789\n"
            'config = {"api_key": "plainvalue12345"}\n'
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nAAAAbm9uZQ==\n"
            "-----END OPENSSH PRIVATE KEY-----\nafter")
    out = redact(text)
    assert "abc.DEF" not in out and "plainvalue12345" not in out and "b3BlbnNzaC1rZXkt" not in out
    assert out.endswith("after") and "Bearer [REDACTED]" in out


def test_ordinary_text_is_untouched() -> None:
    text = "max_tokens=4096, 17.3 GB/s, __global__ void k(float* x), sm_90, kernelpilot/session-1"
    assert redact(text) == text


def test_redact_obj_walks_nested_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-abcdefghijklmnop0123")
    v = Verdict(status="runtime_error", error="request failed with key sk-test-abcdefghijklmnop0123",
                findings=[Finding(rule="x", message="m", evidence="token ghp_AbCdEf0123456789AbCdEf0123456789abcd")])
    data = redact_obj({"verdict": v.to_dict(), "api_key": "short-but-secret", "max_tokens": 100,
                       "list": ["sk-test-abcdefghijklmnop0123", 3, None], "tuple": ("x",)})
    blob = json.dumps(data)
    assert "sk-test-abcdefghijklmnop0123" not in blob and "ghp_" not in blob and "short-but-secret" not in blob
    assert data["max_tokens"] == 100 and data["list"][1:] == [3, None] and data["tuple"] == ("x",)
    assert Verdict.from_dict(data["verdict"]).status == "runtime_error"


def test_secret_names() -> None:
    for name in ("OPENAI_API_KEY", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "HF_TOKEN"):
        assert is_secret_name(name)
    for name in ("PATH", "CUDA_HOME", "SSH_AUTH_SOCK", "TORCH_CUDA_ARCH_LIST", "GIT_AUTHOR_NAME"):
        assert not is_secret_name(name)
