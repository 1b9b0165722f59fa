"""The one record of what install changed (``retriever.runners.record``)
and the one refusal every installer raises (``fileutil.Refused``)."""

import pytest

from retriever import fileutil


def test_every_refusal_is_one_class_with_a_hint():
    # Six classes in three families meant one thing, "left unchanged, and
    # here is why", and callers caught them as a tuple.
    from retriever.runners import changes, hermes_install, install
    for cls in (fileutil.ReadOnly, fileutil.NotAFile, fileutil.InTheWay, fileutil.Unreadable, fileutil.Busy,
                install.Edited, changes.NoReader, hermes_install.HermesInstallError):
        assert issubclass(cls, fileutil.Refused), cls
    assert install.Refused is fileutil.Refused
    exc = fileutil.Refused("x.json is read-only; left unchanged", hint="make it writable")
    assert str(exc) == "x.json is read-only; left unchanged - make it writable"
    assert exc.hint == "make it writable"
    with pytest.raises(fileutil.Refused) as err:
        raise fileutil.ReadOnly("f is read-only (mode 444); left unchanged - make it writable (chmod u+w) to change it")
    assert err.value.hint == "make it writable (chmod u+w) to change it"
