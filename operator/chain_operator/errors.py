"""The operator's typed errors, and the one place that maps them to kopf's retry behaviour.

`Retry` errors are conditions that time fixes (a node restarting, the API server busy): kopf calls the
handler again after a delay. `Stop` errors need a person (an invalid spec, an upgrade whose pod never came
back): the handler fails for good and the ChainNetwork carries a status condition saying why.
"""

from __future__ import annotations

import kopf

from chain_operator.conditions import ConditionReason

R = ConditionReason


class OperatorError(Exception):
    """Root of every error the operator raises on purpose; `reason` is a stable CamelCase code."""

    reason: ConditionReason = R.OPERATOR_ERROR

    def __init__(self, message: str, *, reason: ConditionReason | None = None) -> None:
        super().__init__(message)
        if reason is not None:
            self.reason = reason


class Retry(OperatorError):
    """Try again later."""

    reason = R.RETRYING

    def __init__(self, message: str, *, delay: float = 5.0, reason: ConditionReason | None = None) -> None:
        super().__init__(message, reason=reason)
        self.delay = delay


class Stop(OperatorError):
    """Do not retry: the spec or the cluster needs attention."""

    reason = R.FAILED


class SpecInvalid(Stop):
    reason = R.INVALID_SPEC


class UpgradeFailed(Stop):
    reason = R.UPGRADE_FAILED


class NodeUnreachable(Retry):
    reason = R.NODE_UNREACHABLE


class KubeError(OperatorError):
    """The Kubernetes API answered with an error status."""

    reason = R.KUBERNETES_API_ERROR

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class KubeNotFound(KubeError):
    reason = R.NOT_FOUND


def to_kopf(exc: OperatorError) -> kopf.TemporaryError | kopf.PermanentError:
    """The kopf error for one of ours (the only place this decision is made)."""
    if isinstance(exc, Retry):
        return kopf.TemporaryError(f"{exc.reason}: {exc}", delay=exc.delay)
    if isinstance(exc, KubeError) and (exc.status >= 500 or exc.status in (409, 429)):
        return kopf.TemporaryError(f"{exc.reason}: {exc}", delay=5.0)
    return kopf.PermanentError(f"{exc.reason}: {exc}")
