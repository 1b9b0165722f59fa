"""The one answer pipeline: ranking happens within what the caller shows.

A hidden skill (Hermes: another OS, a disabled tool...) must never take a
top-k place, set the relative floor or decide abstention.  These run the
real build and the real pipeline on skill trees in tmp_path.
"""

import pytest

from retriever import service
from skillret_helpers import make_skill


@pytest.fixture
def index(tmp_path):
    root = tmp_path / "skills"
    # One strong match for "ftp upload release archives", and weaker ones
    # that share only a word or two with it.
    make_skill(root, "ftp-upload", {"name": "ftp-upload",
               "description": "Upload release archives to a legacy FTP server over ftp"})
    make_skill(root, "ftp-mirror", {"name": "ftp-mirror",
               "description": "Mirror a folder to an FTP server"})
    for i in range(8):
        make_skill(root, "archive-%d" % i, {"name": "archive-%d" % i,
                   "description": "Pack release archives, variant %d" % i})
    return {"roots": [str(root)], "index": str(tmp_path / "i.skr"), "quiet": True}


def _ids(results):
    return [r["id"] for r in results]


def test_without_keep_the_best_match_leads(index):
    results, _ = service.answer("upload release archives to the ftp server", dict(index))
    assert _ids(results)[0] == "ftp-upload"


def test_a_hidden_best_match_does_not_silence_a_visible_one(index):
    # ftp-upload alone sets a floor that ftp-mirror passes only without it.
    req = dict(index, keep=lambda r: r["id"] != "ftp-upload")
    results, _ = service.answer("upload to the legacy ftp server", req)
    assert results and "ftp-upload" not in _ids(results)
    assert _ids(results)[0] == "ftp-mirror"


def test_hidden_skills_take_no_top_k_place(index):
    q = "pack the release archives"
    everything, _ = service.answer(q, dict(index, k=6))
    assert len(everything) == 6
    hidden = set(_ids(everything)[:2])
    shown, _ = service.answer(q, dict(index, k=6, keep=lambda r: r["id"] not in hidden))
    assert len(shown) == 6 and not hidden & set(_ids(shown))


def test_keep_that_hides_everything_answers_nothing(index):
    results, _ = service.answer("upload release archives", dict(index, keep=lambda r: False))
    assert results == []


def test_the_plugin_path_with_an_index_in_memory(index):
    idx, path = service.open_index(dict(index))
    results, where = service.answer("upload to the legacy ftp server",
                                    {"keep": lambda r: r["id"] != "ftp-upload"}, idx=idx)
    assert where is None and _ids(results)[0] == "ftp-mirror"
