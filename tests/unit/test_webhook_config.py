"""The webhook sink's pure parts: requests cut by Flush, the URI and options turned into a client's
configuration, headers refused without showing their values. The feeds into a real endpoint are in
servers/test_webhook_sink.py."""

from __future__ import annotations

import numpy as np
import pytest

from feedctl.sinks.webhook import batch_ends, sink_config

TOKEN = "Bearer s3cr3t-hook-token"


def test_requests_close_at_the_message_or_byte_limit_and_keep_the_remainder():
    sizes = np.array([10, 10, 10, 10, 10, 10, 10], dtype=np.int64)
    assert batch_ends(sizes, 3, 0) == ([3, 6], 6)
    assert batch_ends(sizes, 0, 25) == ([3, 6], 6)  # the message that reaches the limit closes the request
    assert batch_ends(sizes, 2, 25) == ([2, 4, 6], 6)
    assert batch_ends(sizes, 0, 5) == ([1, 2, 3, 4, 5, 6, 7], 7)  # a message larger than the limit goes alone
    assert batch_ends(sizes, 0, 1000) == ([], 0)


def test_the_webhook_uri_becomes_an_https_url_with_its_tls_parameters_taken_out():
    config = sink_config(
        "webhook-https://hooks.example.com:8443/cdc?insecure_tls_skip_verify=true&team=a",
        {
            "webhook_auth_header": TOKEN,
            "extra_headers": {"X-Feed": "f"},
            "compression": "gzip",
            "webhook_sink_config": {
                "Flush": {"Messages": 50, "Frequency": "1s"},
                "Retry": {"Max": "inf", "Backoff": "2s"},
            },
        },
    )
    assert config["url"] == "https://hooks.example.com:8443/cdc?team=a" and config["insecure"]
    assert config["headers"] == {
        "Content-Type": "application/json",
        "X-Feed": "f",
        "Authorization": TOKEN,
        "Content-Encoding": "gzip",
    }
    assert (config["messages"], config["batched"], config["max_retries"], config["backoff"]) == (50, True, None, 2.0)
    default = sink_config("webhook-http://127.0.0.1:9/", {})
    assert (default["url"], default["batched"], default["max_retries"], default["timeout"]) == (
        "http://127.0.0.1:9/",
        False,
        3,
        3.0,
    )


def test_a_header_with_a_line_break_is_refused_without_showing_its_value():
    with pytest.raises(Exception) as refused:
        sink_config("webhook-https://hooks.example.com/", {"webhook_auth_header": "Bearer a\nInjected: b"})
    assert "Authorization" in str(refused.value) and "Bearer" not in str(refused.value)
    assert sink_config("webhook-https://h/", {"webhook_auth_header": TOKEN + "\n"})["headers"]["Authorization"] == TOKEN
