"""The tests' own PostgreSQL: a throwaway cluster when no server runs, one line when none can."""

import re
from pathlib import Path

import postgres_server
import pytest
import sqlalchemy as sa


def folders() -> set[Path]:
    return set(Path(postgres_server.tempfile.gettempdir()).glob("tito-postgres-*"))


def test_a_throwaway_server_serves_on_loopback_and_leaves_nothing_behind():
    before = folders()
    with postgres_server.throwaway() as url:
        engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
        with engine.connect() as db:
            db.execute(sa.text("CREATE DATABASE tito_throwaway_check"))
            names = db.execute(sa.text("SELECT datname FROM pg_database")).scalars().all()
        engine.dispose()
        port = int(re.search(r"127\.0\.0\.1:(\d+)/", url).group(1))
        made = folders() - before
        assert "tito_throwaway_check" in names and port != 5432 and len(made) == 1
    assert postgres_server.reachable(url) is not None  # stopped
    assert not any(f.exists() for f in made)  # and deleted


def test_without_postgresql_installed_the_reason_is_one_line(monkeypatch):
    monkeypatch.setattr(postgres_server, "binaries", lambda: None)
    with pytest.raises(postgres_server.Unavailable) as err:
        with postgres_server.throwaway():
            pass
    assert "\n" not in str(err.value) and "no initdb" in str(err.value)


def test_a_chosen_server_that_does_not_answer_is_named(monkeypatch):
    url = f"postgresql+psycopg://tito:tito@127.0.0.1:{postgres_server.free_port()}/postgres"
    monkeypatch.setenv("TITO_TEST_POSTGRES", url)
    with pytest.raises(postgres_server.Unavailable) as err:
        with postgres_server.server():
            pass
    assert f"TITO_TEST_POSTGRES={url} does not answer" in str(err.value)
    assert "\n" not in str(err.value)
