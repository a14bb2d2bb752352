"""Each queue's workers redeliver after their own visibility timeout (issue 22, item 5).

kombu's Redis transport keeps unacknowledged messages in one hash per key set and every consumer restores entries
older than its own timeout, so per-queue timeouts need per-queue keys as well as per-queue values.
"""

from __future__ import annotations

import pytest

from genenv.queue import QUEUES, make_celery
from genenv.settings import GenEnvSettings


def test_defaults_outlast_the_jobs_of_each_queue() -> None:
    queue = GenEnvSettings().queue
    assert queue.visibility_timeout_s("control") == 3600
    assert queue.visibility_timeout_s("rollouts") == 12 * 3600
    assert queue.visibility_timeout_s("gpu") == 24 * 3600


@pytest.mark.parametrize("name", QUEUES)
def test_a_worker_app_uses_its_queue_timeout_and_its_own_unacked_keys(name: str) -> None:
    settings = GenEnvSettings.model_validate(
        {"queue": {"eager": False, "control_visibility_timeout_s": 11, "rollouts_visibility_timeout_s": 22,
                   "gpu_visibility_timeout_s": 33}})
    options = make_celery(settings, queue=name).conf.broker_transport_options
    assert options["visibility_timeout"] == {"control": 11, "rollouts": 22, "gpu": 33}[name]
    keys = {options["unacked_key"], options["unacked_index_key"], options["unacked_mutex_key"]}
    assert len(keys) == 3 and all(k.endswith(f":{name}") for k in keys)


def test_a_sending_only_app_has_no_consumer_options() -> None:
    assert make_celery(GenEnvSettings.model_validate({"queue": {"eager": False}})).conf.broker_transport_options == {}
