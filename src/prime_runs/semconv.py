"""The raw OpenTelemetry contract: span names and attribute keys.

Any producer can create these spans with a plain OpenTelemetry tracer; the
run processor turns them into a tracked run (see ``docs/concepts.md``).

- A span named ``run`` is a run. Its ``prime.run.*`` attributes describe it.
  Ending it closes the run: span status ERROR means failed (the status
  description is the reason), otherwise completed, unless
  ``prime.run.status`` names another status. ``prime.run.summary`` (JSON) is
  the summary; without it the SDK computes one from the episodes it saw.
- A child span named ``episode`` (or ``trace`` for a bare trace) whose
  ``prime.record`` attribute holds the record as a JSON string is a logged
  record.
- An ``episode`` span without ``prime.record`` (or a top-level GenAI span) whose
  children are GenAI semantic-convention spans becomes an episode record; the
  ``prime.task.*`` and ``prime.env.id`` attributes on it give its task and
  environment (``docs/genai.md``).
- Other processes join a run through W3C ``traceparent`` plus ``baggage``
  carrying ``prime.run.id``.
- A ``run`` span with ``prime.run.type = "train"`` is a training run
  (``docs/training.md``): ``prime.run.model`` is the base model, ``prime.run.team_id``
  the team (else the configured one), the ``prime.train.*`` keys below are its
  ``TrainingSpec``, and ``prime.run.attach_id`` attaches to a run a launcher created.
  A span named ``step`` with an int ``prime.train.step`` under it (or an event named
  ``step`` on any span under it) is one metrics row; each
  ``prime.train.metrics.<name>`` attribute is the metric ``<name>``.
"""

from __future__ import annotations

RUN_SPAN = "run"
EPISODE_SPAN = "episode"
TRACE_SPAN = "trace"
RECORD_SPANS = frozenset({EPISODE_SPAN, TRACE_SPAN})

# Set by the producer on the run span.
RUN_NAME = "prime.run.name"
RUN_ENVIRONMENTS = "prime.run.environments"  # string array
RUN_MODEL = "prime.run.model"
RUN_FRAMEWORK = "prime.run.framework"
RUN_DESCRIPTION = "prime.run.description"
RUN_TAGS = "prime.run.tags"  # string array
RUN_CONFIG = "prime.run.config"  # JSON object as a string
RUN_CONFIG_PATH = "prime.run.config_path"
RUN_STATUS = "prime.run.status"  # optional terminal status when the span ends
RUN_SUMMARY = "prime.run.summary"  # JSON object as a string
RUN_ERROR = "prime.run.error"
# A training run's (prime.run.type = "train"); the TrainingSpec fields are TRAIN_PREFIX + name.
RUN_TEAM_ID = "prime.run.team_id"
RUN_ATTACH_ID = "prime.run.attach_id"  # the id of a training run a launcher created
TRAIN_PREFIX = "prime.train."  # prime.train.max_steps, .batch_size, ... .wandb_run_name
TRAIN_STEP = "prime.train.step"  # on a `step` span or event: the row's step (an int)
TRAIN_METRICS = "prime.train.metrics."  # prime.train.metrics.<name>: the metric <name>
STEP_SPAN = "step"  # a span (or event) that is one metrics row of a training run

# Set by the processor once the run is registered.
RUN_ID = "prime.run.id"
RUN_URL = "prime.run.url"
RUN_MODE = "prime.run.mode"
RUN_TYPE = "prime.run.type"  # "eval" or "train"; a producer sets "train" (see above)

# On record spans.
RECORD = "prime.record"  # the record as a JSON string (raw producers)
RECORD_ID = "prime.record.id"
RECORD_KIND = "prime.record.kind"  # "episode" | "trace"
RECORD_ENV = "prime.record.environment"
RECORD_REWARD = "prime.record.reward"
RECORD_BYTES = "prime.record.bytes"  # encoded size, when the payload travels beside the span

# On an episode span mapped from GenAI spans (docs/genai.md): its task and environment.
TASK_KEY = "prime.task.key"  # task.key
TASK_PREFIX = "prime.task."  # prime.task.id/name/idx/answer/prompt/description: task.data.*
TASK_DATA = "prime.task.data"  # JSON object: more task.data columns
ENV_ID = "prime.env.id"  # env.id

# W3C baggage key that lets another process join a run.
BAGGAGE_RUN_ID = "prime.run.id"
