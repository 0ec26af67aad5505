"""BundleStore on a real directory."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from bundle_loader import BundleLoaderError, BundleStore, sha256_hex

BUNDLE = b"export default { id: 'notes', setup() {} };\n"
DIGEST = sha256_hex(BUNDLE)


def stored_path(root: Path, digest: str = DIGEST) -> Path:
    return root / "sha256" / digest[:2] / digest


def store_error(call: Callable[..., object], *args: object) -> BundleLoaderError:
    with pytest.raises(BundleLoaderError) as caught:
        call(*args)
    assert str(caught.value) == caught.value.message
    return caught.value


def leftovers(root: Path) -> list[str]:
    return sorted(p.name for p in root.rglob("*") if p.is_file() and p.name != DIGEST)


def test_round_trip_and_layout(tmp_path: Path) -> None:
    store = BundleStore(tmp_path / "bundles")

    assert store.put(BUNDLE) == DIGEST

    assert stored_path(tmp_path / "bundles").read_bytes() == BUNDLE
    assert store.has(DIGEST)
    assert store.get(DIGEST) == BUNDLE


def test_root_is_created_lazily(tmp_path: Path) -> None:
    root = tmp_path / "deep" / "bundles"
    store = BundleStore(str(root))
    assert not root.exists()
    assert not store.has(DIGEST)
    assert not root.exists()

    store.put(BUNDLE)

    assert root.is_dir()


def test_digests_are_accepted_in_any_normal_form(tmp_path: Path) -> None:
    store = BundleStore(tmp_path)
    store.put(BUNDLE)

    assert store.get("sha256:" + DIGEST.upper()) == BUNDLE
    assert store.has(DIGEST.upper())


@pytest.mark.parametrize("method", ["get", "has"])
def test_malformed_digest_is_invalid_sha256(method: str, tmp_path: Path) -> None:
    store = BundleStore(tmp_path)

    err = store_error(getattr(store, method), "../../etc/passwd")

    assert err.code == "invalid_sha256"


def test_put_is_idempotent_and_leaves_no_temporary_files(tmp_path: Path) -> None:
    store = BundleStore(tmp_path)

    assert store.put(BUNDLE) == store.put(BUNDLE) == DIGEST

    assert store.get(DIGEST) == BUNDLE
    assert leftovers(tmp_path) == []


def test_put_makes_the_file_visible_only_once_complete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = BundleStore(tmp_path)
    target = stored_path(tmp_path)
    seen: list[tuple[Path, bool, bytes]] = []
    real_replace = os.replace

    def observing_replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        seen.append((Path(src).parent, Path(dst).exists(), Path(src).read_bytes()))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", observing_replace)
    store.put(BUNDLE)

    # Written in full next to the target, under another name, then renamed over it.
    assert seen == [(target.parent, False, BUNDLE)]
    assert target.read_bytes() == BUNDLE


def test_get_of_an_absent_bundle_is_not_stored(tmp_path: Path) -> None:
    store = BundleStore(tmp_path / "never-created")

    err = store_error(store.get, DIGEST)

    assert (err.code, err.message) == ("not_stored", f"no bundle with sha256 {DIGEST} is stored")


def test_tampered_file_is_detected_removed_and_replaceable(tmp_path: Path) -> None:
    store = BundleStore(tmp_path)
    store.put(BUNDLE)
    path = stored_path(tmp_path)
    tampered = BUNDLE.replace(b"notes", b"evil!")
    path.write_bytes(tampered)

    err = store_error(store.get, DIGEST)

    assert err.code == "integrity_mismatch"
    assert err.message == (
        f"stored bundle {DIGEST} is damaged (its content hashes to {sha256_hex(tampered)}) "
        "and was removed"
    )
    assert not path.exists()
    assert not store.has(DIGEST)
    assert store_error(store.get, DIGEST).code == "not_stored"

    store.put(BUNDLE)
    assert store.get(DIGEST) == BUNDLE


def test_truncated_file_is_detected(tmp_path: Path) -> None:
    store = BundleStore(tmp_path)
    store.put(BUNDLE)
    stored_path(tmp_path).write_bytes(BUNDLE[:10])

    assert store_error(store.get, DIGEST).code == "integrity_mismatch"


def test_put_repairs_a_damaged_copy(tmp_path: Path) -> None:
    store = BundleStore(tmp_path)
    store.put(BUNDLE)
    stored_path(tmp_path).write_bytes(b"garbage")

    store.put(BUNDLE)

    assert store.get(DIGEST) == BUNDLE


def test_has_does_not_verify_content(tmp_path: Path) -> None:
    store = BundleStore(tmp_path)
    store.put(BUNDLE)
    stored_path(tmp_path).write_bytes(b"garbage")

    assert store.has(DIGEST)


def test_root_that_is_a_file_is_store_failed_without_the_path(tmp_path: Path) -> None:
    root = tmp_path / "not-a-directory"
    root.write_bytes(b"")
    store = BundleStore(root)

    err = store_error(store.put, BUNDLE)

    assert (err.code, err.message) == (
        "store_failed",
        "could not create the bundle store directory",
    )
    assert str(tmp_path) not in err.message


def test_failed_write_is_store_failed_and_cleans_up(tmp_path: Path) -> None:
    store = BundleStore(tmp_path)
    stored_path(tmp_path).mkdir(parents=True)  # a directory where the file should go

    err = store_error(store.put, BUNDLE)

    assert (err.code, err.message) == ("store_failed", "could not write the bundle to the store")
    assert leftovers(tmp_path) == []


def test_unreadable_entry_is_store_failed(tmp_path: Path) -> None:
    store = BundleStore(tmp_path)
    stored_path(tmp_path).mkdir(parents=True)

    err = store_error(store.get, DIGEST)

    assert (err.code, err.message) == ("store_failed", "could not read the bundle from the store")
    assert stored_path(tmp_path).is_dir()


def test_bundles_are_stored_independently(tmp_path: Path) -> None:
    store = BundleStore(tmp_path)
    other = b"export default {};\n"
    digests = {store.put(BUNDLE), store.put(other), store.put(b"")}

    assert len(digests) == 3
    assert [store.get(d) for d in (DIGEST, sha256_hex(other), sha256_hex(b""))] == [
        BUNDLE,
        other,
        b"",
    ]
