"""Tenant tokens in the settings: parsed from GENENV_AUTH__TENANT_TOKENS, names checked, never shown; and the one
token → caller mapping."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from genenv.http.auth import Authenticator
from genenv.settings import GenEnvSettings
from genenv.tenancy import DEFAULT_TENANT, SERVICE, tenant_caller


def test_tenant_tokens_come_from_the_environment_and_stay_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GENENV_AUTH__TOKENS", '["svc"]')
    monkeypatch.setenv("GENENV_AUTH__TENANT_TOKENS", '{"tok-a": "team-a", "tok-a2": "team-a", "tok-b": "b.2_x"}')
    settings = GenEnvSettings()
    assert sorted(settings.auth.tenant_tokens.values()) == ["b.2_x", "team-a", "team-a"]
    assert "tok-a" not in repr(settings) and "tok-a" not in str(settings.model_dump())
    auth = Authenticator.from_settings(settings.auth, tenants=True)
    assert auth.identify("tok-a") == auth.identify("tok-a2") == tenant_caller("team-a")
    assert auth.identify("svc") == SERVICE and SERVICE.tenant == DEFAULT_TENANT and SERVICE.all_tenants
    assert auth.identify("tok-") is None and auth.identify("") is None
    # A service that does not isolate tenants knows only the service tokens.
    assert Authenticator.from_settings(settings.auth, tenants=False).identify("tok-a") is None


@pytest.mark.parametrize(
    ("tenant_tokens", "message"),
    [
        ({"t": "Team-A"}, "not valid"),
        ({"t": ""}, "not valid"),
        ({"t": "a" * 65}, "not valid"),
        ({"t": "-a"}, "not valid"),
        ({"": "a"}, "must not be empty"),
        ({"svc": "a"}, "both in auth.tokens and auth.tenant_tokens"),
    ],
)
def test_bad_tenant_tokens_are_refused(tenant_tokens: dict[str, str], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        GenEnvSettings(auth={"tokens": ["svc"], "tenant_tokens": tenant_tokens})  # type: ignore[arg-type]


def test_no_tokens_means_auth_off_and_one_tenant(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GENENV_AUTH__TOKENS", raising=False)
    monkeypatch.delenv("GENENV_AUTH__TENANT_TOKENS", raising=False)
    auth = Authenticator.from_settings(GenEnvSettings().auth, tenants=True)
    assert not auth.enabled
