"""URLs in messages: the password of the user part is left out, and the values of query
parameters named for a secret (libpq's password and sslpassword, any *secret* or *token*) are
shown as ***, in store messages and in the settings' errors alike."""

from __future__ import annotations

import pytest

from controlplane.settings import ConfigError, load_settings
from controlplane.store.engine import redact


@pytest.mark.parametrize(("url", "shown"), [
    ("postgresql+psycopg://postgres@127.0.0.1:5432/x?password=QuerySecret77",
     "postgresql+psycopg://postgres@127.0.0.1:5432/x?password=***"),
    ("postgresql://alice:secret@db:5432/h?sslmode=require&sslpassword=K1&PassWord=K2",
     "postgresql://alice@db:5432/h?sslmode=require&sslpassword=***&PassWord=***"),
    ("postgresql://u@db/h?client_secret=K3&access_token=K4&application_name=headroom",
     "postgresql://u@db/h?client_secret=***&access_token=***&application_name=headroom"),
    ("postgresql://u@db/h?pass%77ord=K5", "postgresql://u@db/h?pass%77ord=***"),  # encoded name
    ("postgresql://u@db/h?password=a@b#c;d&x=1", "postgresql://u@db/h?password=***&x=1"),
    ("postgresql://u:p?w@db/h?password=K6", "postgresql://u@db/h?password=***"),  # ? in password
    ("sqlite:////var/lib/a@b.db", "sqlite:////var/lib/a@b.db"),  # an @ in a path is no user
    ("sqlite:///headroom.db?mode=ro", "sqlite:///headroom.db?mode=ro"),
])
def test_a_url_is_shown_without_its_password_and_its_secret_parameters_values(
        url: str, shown: str) -> None:
    assert redact(url) == shown


def test_a_settings_error_echoes_the_url_with_its_secrets_as_stars() -> None:
    url = "mysql://operator:pw1@127.0.0.1:9/headroom?password=pw2&ssl_token=pw3"
    with pytest.raises(ConfigError) as caught:
        load_settings(db={"url": url})
    assert "pw" not in str(caught.value)
    assert "'mysql://operator:***@127.0.0.1:9/headroom?password=***&ssl_token=***'" in str(
        caught.value)
