"""Where backups live in a bucket and what a listing means: URLs, names, completeness, the age of an attempt."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from node.errors import BackupFailed, BackupReason
from node.server.backup.layout import DATA, INFO, MANIFEST, STARTED, Location, backup_name, group

ROOT = bytes(range(32))
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_urls_name_a_root_or_one_backup():
    assert Location.parse("s3://bkt") == Location("bkt", "")
    assert Location.parse("s3://bkt/a/b/") == Location("bkt", "a/b")
    name = backup_name(42, ROOT)
    named = Location.parse(f"s3://bkt/a/devnet/{name}")
    assert (named.prefix, named.network, named.name) == ("a", "devnet", name)
    assert named.url() == f"s3://bkt/a/devnet/{name}"
    assert Location("bkt", "a").key("devnet", name, MANIFEST) == f"a/devnet/{name}/manifest.pb"
    assert Location("bkt", "").network_prefix("devnet") == "devnet/"


@pytest.mark.parametrize("url", ["bkt/x", "http://bkt/x", "s3://B_ad/x", "s3://ab/x"])
def test_bad_urls_are_refused_with_a_reason(url):
    with pytest.raises(BackupFailed) as err:
        Location.parse(url)
    assert err.value.reason is BackupReason.INVALID_ARGUMENT


def test_a_backup_is_complete_only_with_its_manifest_and_sorts_by_height():
    prefix = "p/devnet/"
    old, new, partial = backup_name(9, ROOT), backup_name(10, ROOT), backup_name(11, ROOT)
    objects = [
        (f"{prefix}{new}/{o}", 5 if o == DATA else 1, T0 + timedelta(minutes=i))
        for i, o in enumerate((STARTED, DATA, INFO, MANIFEST))
    ]
    objects += [(f"{prefix}{old}/{o}", 7 if o == DATA else 1, T0) for o in (DATA, INFO, MANIFEST)]
    objects += [(f"{prefix}{partial}/{o}", 1, T0 + timedelta(hours=1)) for o in (STARTED, DATA, INFO)]
    objects += [(f"{prefix}notes.txt", 1, T0), (f"{prefix}{new}/deeper/x", 1, T0)]  # not a backup's objects
    listed = group(objects, prefix)
    assert [(b.name, b.complete) for b in listed] == [(old, True), (new, True), (partial, False)]
    assert listed[1].size == 5 and listed[1].last_modified == T0 + timedelta(minutes=3)
    assert listed[2].last_modified == T0 + timedelta(hours=1)  # the attempt's age: its newest object
