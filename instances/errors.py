"""The instances app's refusals: what a user can act on, with a machine-readable ``code``.

Views and the API turn them into a form error or a 4xx; other apps (storage, apps_marketplace)
raise their own subclasses, so a launch with volumes reports a volume's refusal like any other.
"""

from __future__ import annotations

from core.errors import Refusal


class InstanceError(Refusal):
    """A refusal the user can act on: ``code`` is machine-readable, the message is for people."""

    code = "invalid"


class LaunchInvalid(InstanceError):
    code = "invalid"


class NoCapacity(InstanceError):
    code = "no_capacity"


class QuotaExceeded(InstanceError):
    code = "quota_exceeded"


class FundsTooLow(InstanceError):
    code = "insufficient_funds"


class BudgetReached(InstanceError):
    """The owner's budget has a hard cap and this month's spending reached it (``instances.hooks.spend_guard``)."""

    code = "budget_reached"


class RealNameMissing(InstanceError):
    """This console requires a verified real name before paid use, and the person launching has none
    (``IDENTITY_REAL_NAME_REQUIRED``; identity's ``real_name_check``)."""

    code = "real_name_required"


class OperationNotAllowed(InstanceError):
    code = "invalid_state"


class NoGpuNotSupported(InstanceError):
    """A start without GPU asked of an instance that cannot run without cards (a multi-node cluster)."""

    code = "no_gpu_not_supported"


class QuotaRequestInvalid(InstanceError):
    code = "invalid"


class BackendUnavailable(InstanceError):
    code = "backend_unavailable"


class NotPermitted(InstanceError):
    """The person may see the instance (a teammate's) but not operate it, or their team role does not
    let them launch: a 403, never a 404 (they can see it is there)."""

    code = "forbidden"


class MemberLimitReached(InstanceError):
    """A team member's own limit inside the team (cards held at once, or this month's spend) refuses it."""

    code = "member_limit_reached"


class ReservationInvalid(InstanceError):
    """A reservation staff asked for that cannot be granted as given (``field`` says which value)."""

    code = "invalid"


class ResizeNotSupported(InstanceError):
    """The instance's provider cannot grow or shrink a running cluster (no ``ClusterResizeCapability``),
    or the instance is not a cluster."""

    code = "resize_not_supported"


class ResizeRefused(InstanceError):
    """The provider refused this resize (a joining node could not take it): nothing changed."""

    code = "resize_refused"


class ImageInUse(InstanceError):
    """A saved image is deleted while an instance that may still run uses it (release that first)."""

    code = "image_in_use"


class ImageExists(InstanceError):
    """The account already has a live saved image of that name and tag."""

    code = "image_exists"


class ImageSaveNotSupported(InstanceError):
    """The instance's provider cannot save machines as images, or the console has no registry for them."""

    code = "image_save_not_supported"


class ImageBuildNotSupported(InstanceError):
    """The console has no image builder (no provider that builds) or no registry to push builds to."""

    code = "image_build_not_supported"


class SnapshotsNotSupported(InstanceError):
    """The instance's provider cannot snapshot disks (a Kubernetes cluster without the snapshot API)."""

    code = "snapshots_not_supported"


class SnapshotLimitReached(InstanceError):
    """The instance already keeps ``INSTANCES_SNAPSHOTS_MAX`` snapshots: delete one first."""

    code = "snapshot_limit_reached"


class ImageImportRefused(InstanceError):
    """An image could not be imported ("Bring your own image"): ``status`` is the API's answer (a 4xx the
    person can act on, or 503 while the registry does not answer, with ``retry_after`` seconds)."""

    code = "image_import_refused"
    status = 400
    retry_after: int | None = None


class RegistryNotAllowed(ImageImportRefused):
    """The reference names a registry the operator does not allow (``IMAGES_ALLOWED_REGISTRIES``)."""

    code = "registry_not_allowed"
    status = 400

    def __init__(self, message: str, *, allowed: list[str]) -> None:
        super().__init__(message, field="reference")
        self.allowed = allowed


class RegistryAuthRequired(ImageImportRefused):
    """The image is private and the account saved no credential for its registry."""

    code = "registry_auth_required"
    status = 403


class RegistryAuthFailed(ImageImportRefused):
    """The registry refused the account's saved credential for it."""

    code = "registry_auth_failed"
    status = 403


class ImageNotFound(ImageImportRefused):
    """The registry has no such repository, tag or digest."""

    code = "image_not_found"
    status = 404


class ImageWrongArchitecture(ImageImportRefused):
    """The image is built for another platform than the console's hosts run (``IMAGES_PLATFORM``)."""

    code = "image_wrong_architecture"
    status = 422


class RegistryUnavailable(ImageImportRefused):
    """The registry did not answer in time, or failed: nothing was recorded; try again later."""

    code = "registry_unavailable"
    status = 503
    retry_after = 30
