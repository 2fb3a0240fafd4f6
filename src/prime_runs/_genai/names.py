"""GenAI semantic-convention names the mapping reads (semconv 1.37 to 1.44, older aliases)."""

from __future__ import annotations

from prime_runs.semconv import ENV_ID as ENV_ID
from prime_runs.semconv import TASK_DATA as TASK_DATA
from prime_runs.semconv import TASK_PREFIX as TASK_PREFIX

SEMCONV_VERSION = "1.44.0"  # the gen_ai conventions whose names this mapping reads

OPERATION = "gen_ai.operation.name"
AGENT_OPERATIONS = frozenset({"invoke_agent", "create_agent"})
CALL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
TOOL_OPERATION = "execute_tool"
ROOT_OPERATIONS = frozenset({"invoke_agent"}) | CALL_OPERATIONS
WORKFLOW_OPERATION = "invoke_workflow"  # an episode root too, but no agent's trace
# The conventions' finish reason where verifiers' records name it otherwise.
FINISH_REASON_ALIASES = {"tool_call": "tool_calls"}

AGENT_NAME = "gen_ai.agent.name"
AGENT_ID = "gen_ai.agent.id"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_ID = "gen_ai.response.id"
FINISH_REASONS = "gen_ai.response.finish_reasons"
PROVIDER = "gen_ai.provider.name"
SYSTEM = "gen_ai.system"  # older name of the provider
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
OLD_INPUT_TOKENS = "gen_ai.usage.prompt_tokens"
OLD_OUTPUT_TOKENS = "gen_ai.usage.completion_tokens"
CACHED_TOKENS = "gen_ai.usage.cache_read.input_tokens"
REASONING_TOKENS = "gen_ai.usage.reasoning.output_tokens"
# Cache writes: the record's usage has no field; their sum goes to info.genai. The
# conventions renamed cache_creation to cache_write after 1.44; both are read.
CACHE_WRITE_TOKENS = (
    "gen_ai.usage.cache_write.input_tokens",
    "gen_ai.usage.cache_creation.input_tokens",
)
ERROR_TYPE = "error.type"
SERVER_ADDRESS = "server.address"

SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"

TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
# pydantic-ai's format version 2 writes the result under its own name.
TOOL_RESULTS = (TOOL_RESULT, "tool_response")

# Request knobs copied into calls[].sampling (the name after the prefix is the key).
SAMPLING_PREFIX = "gen_ai.request."
SAMPLING_KEYS = (
    "temperature",
    "top_p",
    "top_k",
    "max_tokens",
    "seed",
    "frequency_penalty",
    "presence_penalty",
    "stop_sequences",
)

# Older conventions: one span event per message.
MESSAGE_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
CHOICE_EVENT = "gen_ai.choice"
EVENT_CONTENT = "gen_ai.event.content"  # the event body as JSON, where it travels on the span

EVALUATION_EVENT = "gen_ai.evaluation.result"
EVALUATION_NAME = "gen_ai.evaluation.name"
EVALUATION_SCORE = "gen_ai.evaluation.score.value"
EVALUATION_LABEL = "gen_ai.evaluation.score.label"
EVALUATION_EXPLANATION = "gen_ai.evaluation.explanation"

# Producer attributes (prime.*) on the episode span: the task and the environment.
TASK_KEYS = ("key", "id", "name", "idx", "answer", "prompt", "description")
