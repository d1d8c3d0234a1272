"""The corpus's pure rules: licences read from sdist metadata, paths that are not code people write, the
held-out files the benchmarks type, and the n-gram fingerprints decontamination compares."""
from __future__ import annotations

from pathlib import PurePosixPath

import pytest
from packaging.version import Version

from quickcode.draft_model import dedup
from quickcode.draft_model.corpus import FORCED_HELDOUT, excluded_path, is_heldout
from quickcode.draft_model.pypi import _sdist_version, expression_licence, licence_of


def _pkg_info(**fields) -> str:
    lines = ["Metadata-Version: 2.4", "Name: x", "Version: 1.0"]
    for k, v in fields.items():
        for item in v if isinstance(v, list) else [v]:
            lines.append(f"{k.replace('_', '-')}: {item}")
    return "\n".join(lines) + "\n\n"


@pytest.mark.parametrize("fields, texts, want", [
    ({"License_Expression": "MIT"}, [], "MIT"),
    ({"License_Expression": "Apache-2.0 OR BSD-3-Clause"}, [], "Apache-2.0"),
    ({"License_Expression": "MIT OR GPL-2.0-only"}, [], "MIT"),             # one permissive alternative
    ({"License_Expression": "MIT AND GPL-3.0-or-later"}, [], "GPL"),         # both apply: refused
    ({"License_Expression": "LGPL-2.1-or-later"}, [], "LGPL"),
    ({"License_Expression": "MPL-2.0"}, [], "MPL"),
    ({"Classifier": ["License :: OSI Approved :: BSD License"]}, [], "BSD"),
    ({"Classifier": ["License :: OSI Approved :: MIT License",
                     "License :: OSI Approved :: GNU General Public License v3 (GPLv3)"]}, [], "GPL"),
    ({"Classifier": ["License :: OSI Approved :: GNU Lesser General Public License v3 (LGPLv3)"]}, [], "LGPL"),
    ({"License": "PSF"}, [], "PSF-2.0"),
    ({"License": "Proprietary"}, [], "proprietary"),
    ({"License": "UNKNOWN"}, ["Permission is hereby granted, free of charge, to any person"], "MIT"),
    ({}, ["Redistribution and use in source and binary forms, with or without"], "BSD"),
    ({}, ["GNU GENERAL PUBLIC LICENSE\n Version 3"], "GPL"),
    ({}, [], "unknown"),
    # a License field holding the whole text: BSD says "All rights reserved", Apache "commercial damages"
    ({"License": "Copyright (c) 2001-2002 Enthought, Inc. 2003, SciPy Developers. All rights reserved. "
                 "Redistribution and use in source and binary forms, with or without modification, are permitted "
                 "provided that the following conditions are met: ..."}, [], "BSD"),
    ({"License": "Apache License Version 2.0, January 2004 ... including but not limited to damages for loss of "
                 "goodwill, work stoppage, computer failure or malfunction, or any and all other commercial damages "
                 "or losses ... " + "x" * 100}, [], "Apache-2.0"),
    ({"License_Expression": "Apache-2.0 AND Python-2.0"}, [], "Apache-2.0"),
    ({"License_Expression": "ZPL-2.1"}, [], "ZPL-2.1"),
    ({"Classifier": ["License :: Other/Proprietary License"]}, [], "proprietary"),
])
def test_the_licence_of_an_sdist_comes_from_its_metadata_else_its_licence_file(fields, texts, want):
    assert licence_of(_pkg_info(**fields), texts) == want


def test_an_spdx_expression_with_parentheses_and_exceptions():
    assert expression_licence("Apache-2.0 WITH LLVM-exception") == "Apache-2.0"
    assert expression_licence("GPL-2.0-or-later WITH Classpath-exception-2.0") == "GPL"


def test_sdist_file_names_give_their_version():
    assert _sdist_version("python_dateutil-4.0.0.tar.gz", "python-dateutil") == Version("4.0.0")
    assert _sdist_version("zope.interface-8.0.zip", "zope-interface") == Version("8.0")
    assert _sdist_version("Foo.Bar-2.1rc1.tar.gz", "foo_bar") == Version("2.1rc1")
    assert _sdist_version("attrs-26.1.0-py3-none-any.whl", "attrs") is None
    assert _sdist_version("attrs-extra-1.0.tar.gz", "attrs") is None              # another project's sdist
    assert _sdist_version("attrs-latest.tar.gz", "attrs") is None                 # no version


@pytest.mark.parametrize("path, excluded", [
    ("pkg/core.py", False), ("pkg/tests/test_core.py", True), ("pkg/test_core.py", True),
    ("tests/helpers.py", True), ("pkg/_vendor/six.py", True), ("vendored-meson/x/y.py", True),
    ("pkg/third_party/x.py", True), ("meson/test cases/common/a.py", True), ("pkg/conftest.py", True),
    ("pkg/api_pb2.py", True), ("pkg/migrations/0001_initial.py", True), ("unittest/case.py", False),
    ("pkg/contest.py", False), ("pkg/attest/sign.py", False),
])
def test_paths_that_are_not_code_people_write_are_excluded(path, excluded):
    assert excluded_path(PurePosixPath(path)) is excluded


def test_the_files_the_typing_benchmark_types_are_always_held_out():
    from quickcode.benchmarks.typing import DEFAULT_FILES

    assert FORCED_HELDOUT == {f"stdlib:{f.removesuffix('.py')}" for f in DEFAULT_FILES}
    assert all(is_heldout(m, 0.0) for m in FORCED_HELDOUT)


def test_ngrams_ignore_whitespace_and_skip_runs_of_literals():
    a = "def f(a, b):\n    return sorted(set(a) & set(b), key=len, reverse=True)\n"
    b = "def f( a,b ):\n\n        return sorted( set(a) & set(b),\n  key=len, reverse=True )"
    idx = dedup.NgramIndex.of_texts([a], min_names=0)
    assert idx.hits(dedup.ngram_hashes(dedup.token_hashes(b), dedup.NGRAM_TOKENS)) == len(idx) > 0
    literals = dedup.NgramIndex.of_texts(["x = [[1, 2, 3], [4, 5, 6], [7, 8, 9], ['a', 'b', 'c']]"])
    assert len(literals) == 0
