"""Scoring an outside agent's attempts: check the report against its lease, have the verifier score the replies
(the same service path, and so the same checkers, as our rollout workers' attempts), then record them.

The verifier is called between two transactions, so no database lock is held while a checker runs; the second
transaction checks the report again before it records anything (see genenv.db.repositories.leases).
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

import httpx
from starlette.concurrency import run_in_threadpool

from genenv import catalogue
from genenv.clients.base import ApiError
from genenv.clients.verifier import VerifierClient
from genenv.contracts.errors import UnavailableError
from genenv.contracts.leases import AttemptsRecorded, AttemptsReport
from genenv.contracts.rollouts import Verdict, VerifyItem, VerifyRequest
from genenv.contracts.runs import RunConfig
from genenv.db.repositories import leases
from genenv.settings import AuthSettings, GenEnvSettings
from genenv_control_plane.deps import ControlPlane

INPROCESS = "inprocess"
VERIFY_TIMEOUT_S = 300.0


class AttemptVerifier:
    """The verifier client the control plane scores replies with: the service at services.verifier, or the
    verifier app mounted in this process when that is ``inprocess`` (the embedded default), built on first use."""

    def __init__(self, settings: GenEnvSettings, cp: ControlPlane) -> None:
        self._settings = settings
        self._cp = cp
        self._client: VerifierClient | None = None

    def client(self) -> VerifierClient:
        """The client, built once."""
        if self._client is None:
            secret = self._settings.auth.client_token
            token = None if secret is None else secret.get_secret_value()
            url = self._settings.services.verifier
            transport = None
            if url == INPROCESS:
                from genenv_verifier.app import create_app as verifier_app  # only the embedded stack mounts it

                # Mounted in this process, reachable only through this client: no tokens to check.
                local = self._settings.model_copy(update={"auth": AuthSettings()})
                url = "http://verifier"
                transport = httpx.ASGITransport(app=verifier_app(local, sessions=self._cp.db.sessions))
            self._client = VerifierClient(url, token=token, timeout_s=VERIFY_TIMEOUT_S, transport=transport)
        return self._client

    async def verify(self, request: VerifyRequest) -> list[Verdict]:
        """Verdicts in request order; 503 when the verifier does not answer or fails (nothing is recorded then, so
        the client may send the same report again)."""
        try:
            response = await self.client().verify(request)
        except ApiError as exc:
            raise UnavailableError(f"the verifier could not score the replies ({exc}); send the same report again "
                                   "later", code="verifier_unavailable") from exc
        if len(response.verdicts) != len(request.items):
            raise UnavailableError(f"the verifier returned {len(response.verdicts)} verdicts for "
                                   f"{len(request.items)} replies", code="verifier_unavailable")
        return response.verdicts


def report_digest(report: AttemptsReport) -> str:
    """What identifies a report's content (its canonical JSON), kept with its Idempotency-Key."""
    return hashlib.sha256(report.model_dump_json().encode()).hexdigest()


def _check(cp: ControlPlane, run_id: str, report: AttemptsReport, key: str | None,
           digest: str) -> leases.ReportPlan | AttemptsRecorded:
    with cp.transaction() as session:
        return leases.check_report(session, run_id, report, datetime.now(UTC), key, digest)


def _record(cp: ControlPlane, run_id: str, report: AttemptsReport, verdicts: list[Verdict], key: str | None,
            digest: str) -> AttemptsRecorded:
    with cp.transaction() as session:
        return leases.record_report(session, run_id, report, verdicts, datetime.now(UTC), key, digest)


async def report_attempts(
    cp: ControlPlane, verifier: AttemptVerifier, run_id: str, report: AttemptsReport, key: str | None
) -> AttemptsRecorded:
    """Check, score and record a report (or answer a repeated one as before)."""
    digest = report_digest(report)
    plan = await run_in_threadpool(_check, cp, run_id, report, key, digest)
    if isinstance(plan, AttemptsRecorded):
        return plan
    replies = [(i, a) for i, a in enumerate(plan.attempts) if a.reply is not None]
    verdicts: list[Verdict | None] = [None] * len(plan.attempts)
    if replies:
        scored = await verifier.verify(VerifyRequest(
            items=[VerifyItem(domain=a.domain, task=a.payload, response=a.reply or "") for _, a in replies],
            success_threshold=plan.config.curriculum.success_threshold,
        ))
        for (i, _), verdict in zip(replies, scored, strict=True):
            verdicts[i] = verdict
    final = [v if v is not None else client_verdict(plan.config, a)
             for v, a in zip(verdicts, plan.attempts, strict=True)]
    return await run_in_threadpool(_record, cp, run_id, report, final, key, digest)


def client_verdict(config: RunConfig, attempt: leases.PlannedAttempt) -> Verdict:
    """The verdict of a client-scored attempt: valid, its score, a success at the run's threshold (or the domain's
    default threshold when the run sets none)."""
    assert attempt.score is not None
    threshold = config.curriculum.success_threshold
    if threshold is None:
        threshold = catalogue.for_task(attempt.domain, attempt.payload).default_success_threshold
    return Verdict(valid=True, score=attempt.score, success=attempt.score >= threshold)
