"""The canned model answers the OpenAI client both ways verifiers may call it."""

from __future__ import annotations

import openai
import pytest

from fake_model import MODEL_ID, FakeModel

MESSAGES = [
    {"role": "system", "content": "Reply briefly."},
    {"role": "user", "content": "Say exactly: hello wörld 🎉"},
]


def _client(model: FakeModel) -> openai.OpenAI:
    return openai.OpenAI(base_url=model.base_url, api_key="unused", max_retries=0)


def test_non_streaming_completion(fake_model: FakeModel) -> None:
    reply = _client(fake_model).chat.completions.create(model=MODEL_ID, messages=MESSAGES)
    assert reply.choices[0].message.content == "Sure: hello wörld 🎉"
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage is not None and reply.usage.completion_tokens > 0
    assert fake_model.requests[-1].stream is False


def test_streaming_completion_with_usage(fake_model: FakeModel) -> None:
    stream = _client(fake_model).chat.completions.create(
        model=MODEL_ID, messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Sure: hello wörld 🎉"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0
    assert fake_model.requests[-1].stream is True


def test_first_word_and_provider_error(fake_model: FakeModel) -> None:
    client = _client(fake_model)
    partial = [{"role": "user", "content": "Say the first word of: good morning"}]
    reply = client.chat.completions.create(model=MODEL_ID, messages=partial)
    assert reply.choices[0].message.content == "good?"
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(
            model=MODEL_ID, messages=[{"role": "user", "content": "Please fail now"}]
        )
    assert fake_model.requests[-1].status == 500


def test_lists_the_model(fake_model: FakeModel) -> None:
    assert [m.id for m in _client(fake_model).models.list()] == [MODEL_ID]
