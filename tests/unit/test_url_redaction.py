"""A password in a URL (``--libvirt-uri``, ``--hosts``' ``uri``, ``--store``) is never printed:
model.secret.redact_url masks the userinfo's password and every query parameter that holds a
credential (``password``, libpq's ``sslpassword``, ``passwd``, ``pass``, read percent-decoded); a password holding an unencoded ``@`` is refused with the remedy."""

from __future__ import annotations

from pathlib import Path

import pytest

from hypervisors.libvirt.inventory import InventoryError, hosts_from_uris, load_inventory
from model.secret import password_holds_at, redact_url, register_url, scrub, url_passwords
from reports.store import StoreError, checked_url, shown_url

#: (URL, as printed, the passwords it holds, whether a password holds an unencoded '@')
CASES = [
    ("qemu+ssh://root:s3cret@kvm7/system", "qemu+ssh://root:***@kvm7/system", ["s3cret"], False),
    ("qemu+ssh://root@kvm7/system?keyfile=/root/.ssh/k", "qemu+ssh://root@kvm7/system?keyfile=/root/.ssh/k", [],
     False),
    ("qemu:///system", "qemu:///system", [], False),
    ("sqlite:///results/vioconform.db", "sqlite:///results/vioconform.db", [], False),
    ("sqlite:////data/a@b:c/x.db", "sqlite:////data/a@b:c/x.db", [], False),  # '@' in a path is no userinfo
    ("postgresql://vc:pw@db:5432/vioconform?sslmode=require", "postgresql://vc:***@db:5432/vioconform?sslmode=require",
     ["pw"], False),
    ("postgresql://vc@db/vioconform?password=qpw&sslmode=require",
     "postgresql://vc@db/vioconform?password=***&sslmode=require", ["qpw"], False),
    ("postgresql://db/x?sslmode=require&PASSWD=a1;pass=b2", "postgresql://db/x?sslmode=require&PASSWD=***;pass=***",
     ["a1", "b2"], False),
    # a value holding '&' or '#' unencoded is masked to the next parameter or the end, not cut there
    ("postgresql://db/x?password=a&b#c", "postgresql://db/x?password=***", ["a&b#c"], False),
    ("postgresql://db/x?password=a&b&sslmode=require", "postgresql://db/x?password=***&sslmode=require", ["a&b"],
     False),
    # a key SQLAlchemy decodes to a secret one (pass%77ord is password), libpq's sslpassword (the client
    # key's passphrase), any passphrase, secret or token; a path to a file or a key stays
    ("postgresql://db/x?pass%77ord=s3cret&sslmode=require", "postgresql://db/x?pass%77ord=***&sslmode=require",
     ["s3cret"], False),
    ("postgresql://db/x?sslkey=/k.pem&sslpassword=kp%2B1+2", "postgresql://db/x?sslkey=/k.pem&sslpassword=***",
     ["kp%2B1+2", "kp+1+2", "kp+1 2"], False),
    ("postgresql://db/x?%73sl%70assword=kp", "postgresql://db/x?%73sl%70assword=***", ["kp"], False),
    ("postgresql://db/x?passphrase=pp&oauth_client_secret=cs", "postgresql://db/x?passphrase=***&oauth_client_secret=***",
     ["pp", "cs"], False),
    ("postgresql://db/x?passfile=/p&password_file=/q&passage=kept", "postgresql://db/x?passfile=/p&password_file=/q&passage=kept",
     [], False),
    # a second '?' starts what a reader may take as another parameter
    ("postgresql://db/x?sslmode=require?password=pw", "postgresql://db/x?sslmode=require?password=***", ["pw"], False),
    # percent-encoded: masked as written, registered both ways
    ("qemu+ssh://root:p%40ss@kvm7/system", "qemu+ssh://root:***@kvm7/system", ["p%40ss", "p@ss"], False),
    # SQLAlchemy reads '/', '?' and '#' in a password: masked whole
    ("postgresql://vc:p/w@db/x", "postgresql://vc:***@db/x", ["p/w"], False),
    ("postgresql://vc:p?w#x@db/x?sslmode=require", "postgresql://vc:***@db/x?sslmode=require", ["p?w#x"], False),
    ("postgresql://:pw@db/x", "postgresql://:***@db/x", ["pw"], False),
    # a user name with '@' (no password) stays; a password after it is masked
    ("qemu+ssh://admin@corp@kvm7/system", "qemu+ssh://admin@corp@kvm7/system", [], False),
    ("qemu+ssh://admin@corp:pw@kvm7/system", "qemu+ssh://admin@corp:***@kvm7/system", ["pw"], False),
    # an '@' in a query value is not the userinfo's
    ("qemu+ssh://root:pw@kvm7/system?keyfile=/home/a@b/key", "qemu+ssh://root:***@kvm7/system?keyfile=/home/a@b/key",
     ["pw"], False),
    # a password holding '@' unencoded: masked whole (never "u:***@retXyz@host"), and flagged
    ("qemu+ssh://u:ret@Xyz@kvm7/system", "qemu+ssh://u:***@kvm7/system", ["ret@Xyz"], True),
    ("postgresql://u:a@b/c@db/x", "postgresql://u:***@db/x", ["a@b/c"], True),
    ("postgresql://u:a@b?c@db/x?sslmode=require", "postgresql://u:***@db/x?sslmode=require", ["a@b?c"], True),
]


@pytest.mark.parametrize(("url", "shown", "passwords", "holds_at"), CASES, ids=[c[0] for c in CASES])
def test_redact_url(url: str, shown: str, passwords: list[str], holds_at: bool) -> None:
    assert redact_url(url) == shown
    assert shown_url(url) == shown  # the store's messages and the "stored:" line
    assert url_passwords(url) == passwords
    assert password_holds_at(url) is holds_at
    for password in passwords:
        assert password not in redact_url(url)


def test_a_registered_url_password_is_scrubbed_anywhere() -> None:
    register_url("postgresql://vc:Reg1stered-x9@db/x?password=Query-q7z&sslmode=require")
    assert scrub("quoted by a driver: Reg1stered-x9 and Query-q7z") == "quoted by a driver: *** and ***"


def test_a_password_holding_an_unencoded_at_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(InventoryError, match=r"^--libvirt-uri: the password in the URI holds an unencoded '@'; "
                                             r"percent-encode each '@' in it as %40") as uri_error:
        hosts_from_uris(["qemu:///system", "qemu+ssh://root:ret@Xyz@kvm7/system"])
    inventory = tmp_path / "hosts.toml"
    inventory.write_text('[[host]]\nuri = "qemu+ssh://root:ret@Xyz@kvm7/system"\n')
    with pytest.raises(InventoryError, match=r"host 1: the password in the URI holds an unencoded '@'") as file_error:
        load_inventory(inventory)
    with pytest.raises(StoreError, match=r"store postgresql://vc:\*\*\*@db/x: the password in the URL holds an "
                                         r"unencoded '@'; .* PGPASSWORD or ~/.pgpass") as store_error:
        checked_url("postgresql://vc:ret@Xyz@db/x")
    for e in (uri_error.value, file_error.value, store_error.value):
        assert "ret" not in str(e) and "Xyz" not in str(e)
    assert hosts_from_uris(["qemu+ssh://root:p%40ss@kvm7/system"])[0].name == "kvm7"


def test_a_uri_listed_twice_is_named_without_its_password() -> None:
    with pytest.raises(InventoryError, match=r"qemu\+ssh://root:\*\*\*@kvm7/system is listed twice") as e:
        hosts_from_uris(["qemu+ssh://root:Tw1ce-pw@kvm7/system"] * 2)
    assert "Tw1ce-pw" not in str(e.value)
    with pytest.raises(InventoryError, match=r"two hosts are named 'kvm7' \(qemu\+ssh://root:\*\*\*@kvm7/system and"):
        hosts_from_uris(["qemu+ssh://root:Tw1ce-pw@kvm7/system", "qemu+ssh://root:Tw1ce-pw@kvm7/session"])
