"""What must hold before a work dir's object store is opened, and what its refusals mean.

Checked before the store client is built, so that a mistake costs no request and says what
to do in one paragraph:

- `check_url`: the URL names exactly the place the files go. The store client drops a
  `?query` and a `#fragment`, decodes `%` escapes and resolves `.` and `..` parts, so such a
  URL would write somewhere else than it says: it is refused.
- `check_configuration`: a plain-http endpoint needs `AWS_ALLOW_HTTP=true`, and credentials
  must come from somewhere the configuration names. Without any, the store client asks the
  cloud's instance-metadata service (169.254.169.254) for the machine's role; that happens
  only when asked for (`JUDGELINE_INSTANCE_CREDENTIALS=true`, or the provider's own
  variables for a metadata or identity endpoint).
- `explain`: a refusal of the store (no such bucket, keys it does not know) as what to do.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from tasks.errors import InputError, StoreError

__all__ = ["INSTANCE_ENV", "check_configuration", "check_url", "explain"]

INSTANCE_ENV = "JUDGELINE_INSTANCE_CREDENTIALS"
"""`true`: let the store client take the machine's role from the cloud's metadata service."""

_TRUE = {"1", "true", "yes", "on"}

_DROPPED = (
    ("#", "the store client drops a '#...' fragment"),
    ("?", "the store client drops a '?...' query"),
    ("%", "the store client decodes '%' escapes (%2F becomes /)"),
)

# Variables that name a source of credentials (besides the instance-metadata service).
_S3_SOURCES = (
    ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"),
    ("AWS_WEB_IDENTITY_TOKEN_FILE",),
    ("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",),
    ("AWS_CONTAINER_CREDENTIALS_FULL_URI",),
    ("AWS_METADATA_ENDPOINT",),
)
_GCS_SOURCES = (
    ("GOOGLE_SERVICE_ACCOUNT",),
    ("GOOGLE_SERVICE_ACCOUNT_PATH",),
    ("GOOGLE_SERVICE_ACCOUNT_KEY",),
    ("GOOGLE_APPLICATION_CREDENTIALS",),
    ("GOOGLE_BEARER_TOKEN",),
)
_AZURE_SOURCES = (
    ("AZURE_STORAGE_ACCOUNT_KEY",),
    ("AZURE_STORAGE_ACCESS_KEY",),
    ("AZURE_STORAGE_MASTER_KEY",),
    ("AZURE_STORAGE_SAS_KEY",),
    ("AZURE_STORAGE_SAS_TOKEN",),
    ("AZURE_STORAGE_TOKEN",),
    ("AZURE_CLIENT_SECRET",),
    ("AZURE_STORAGE_CLIENT_SECRET",),
    ("AZURE_FEDERATED_TOKEN_FILE",),
    ("AZURE_USE_AZURE_CLI",),
    ("AZURE_STORAGE_USE_EMULATOR",),
    ("AZURE_MSI_ENDPOINT",),
    ("AZURE_IDENTITY_ENDPOINT",),
    ("AZURE_MSI_RESOURCE_ID",),
    ("AZURE_FABRIC_TOKEN_SERVICE_URL",),
)
_SETS = {
    "s3": (
        _S3_SOURCES,
        "AWS_SKIP_SIGNATURE",
        "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary "
        "keys; profiles in ~/.aws are not read), or run where a task role or web identity "
        "sets AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or AWS_WEB_IDENTITY_TOKEN_FILE",
    ),
    "gs": (
        _GCS_SOURCES,
        "GOOGLE_SKIP_SIGNATURE",
        "set GOOGLE_APPLICATION_CREDENTIALS (or GOOGLE_SERVICE_ACCOUNT) to a service "
        "account's key file, or log in with `gcloud auth application-default login`",
    ),
    "az": (
        _AZURE_SOURCES,
        "AZURE_SKIP_SIGNATURE",
        "set AZURE_STORAGE_ACCOUNT_NAME with AZURE_STORAGE_ACCOUNT_KEY (or "
        "AZURE_STORAGE_SAS_TOKEN, or AZURE_CLIENT_ID, AZURE_CLIENT_SECRET and AZURE_TENANT_ID)",
    ),
}
_GCLOUD_ADC = Path(".config/gcloud/application_default_credentials.json")


def _scheme(url: str) -> str:
    scheme = url.split("://", 1)[0].lower()
    return {"s3a": "s3", "azure": "az", "abfs": "az", "abfss": "az", "adl": "az"}.get(
        scheme, scheme
    )


def check_url(url: str) -> None:
    """Refuse a store URL that the store client would not keep exactly (one line)."""
    rest = url.split("://", 1)[1]
    for char, why in _DROPPED:
        if char in rest:
            raise InputError(
                f"work dir URL {url} cannot be used: {why}, so the files would go elsewhere; "
                "name the work dir with letters, digits, '-', '_', '.' and '/' only"
            )
    parts = rest.rstrip("/").split("/")
    for part in parts[1:]:
        if part in ("", ".", ".."):
            shown = "an empty part ('//')" if not part else f"a '{part}' part"
            raise InputError(
                f"work dir URL {url} cannot be used: the store client resolves {shown} away, "
                "so the files would go elsewhere; write the path the files should go to"
            )


def _set(env: Mapping[str, str], name: str) -> bool:
    return bool(env.get(name, "").strip())


def _true(env: Mapping[str, str], name: str) -> bool:
    return env.get(name, "").strip().lower() in _TRUE


def check_configuration(url: str, env: Mapping[str, str] | None = None) -> None:
    """A StoreError saying what to set, before any request, if the environment cannot reach
    the store at `url`: an http endpoint without AWS_ALLOW_HTTP, or no credentials (the
    instance-metadata service is asked only with `INSTANCE_ENV` or a provider's own
    endpoint variable)."""
    env = os.environ if env is None else env
    scheme = _scheme(url)
    if scheme == "s3":
        for name in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT"):
            endpoint = env.get(name, "")
            if endpoint.lower().startswith("http://") and not _true(env, "AWS_ALLOW_HTTP"):
                raise StoreError(
                    f"object store {url}: {name} is a plain-http endpoint ({endpoint}), which "
                    "the store client refuses unless AWS_ALLOW_HTTP=true is set; set it (or "
                    "use the endpoint's https:// address)"
                )
    found = _SETS.get(scheme)
    if found is None:
        return
    sources, anonymous, what = found
    if _true(env, INSTANCE_ENV) or _true(env, anonymous):
        return
    if any(all(_set(env, name) for name in names) for names in sources):
        return
    if scheme == "gs" and (Path.home() / _GCLOUD_ADC).is_file():
        return
    raise StoreError(
        f"object store {url}: no credentials in the environment: {what}. On a cloud machine "
        f"whose own role should be used, set {INSTANCE_ENV}=true to let the store client ask "
        f"the instance-metadata service (it is not asked otherwise); {anonymous}=true reads "
        "a public bucket without credentials"
    )


_HINTS = (
    (
        re.compile(r"NoSuchBucket|bucket does not exist|ContainerNotFound|bucket.{0,40}not found",
                   re.IGNORECASE),
        "the bucket does not exist (or is in another account or endpoint): create it, or fix "
        "the URL or AWS_ENDPOINT_URL",
    ),
    (
        re.compile(r"InvalidAccessKeyId|SignatureDoesNotMatch|AuthenticationFailed|"
                   r"InvalidClientTokenId|ExpiredToken|invalid_grant", re.IGNORECASE),
        "the store does not accept the credentials: check AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary keys), or the Google or "
        "Azure keys in the environment",
    ),
    (
        re.compile(r"AccessDenied|Forbidden|AuthorizationPermissionMismatch|\b403\b",
                   re.IGNORECASE),
        "the credentials may not read and write there: grant them list, get, put and delete "
        "on the bucket and prefix",
    ),
    (
        re.compile(r"builder error", re.IGNORECASE),
        "the store client refused its own configuration: a plain-http endpoint needs "
        "AWS_ALLOW_HTTP=true",
    ),
)  # fmt: skip


def explain(reason: str) -> str | None:
    """What to do about a refusal of the store, by its reason's words; None if unknown."""
    for pattern, hint in _HINTS:
        if pattern.search(reason):
            return hint
    return None
