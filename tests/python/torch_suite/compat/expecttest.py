# SPDX-License-Identifier: MIT
"""What torch.testing._internal.common_utils takes from expecttest, where it is not installed.

expecttest (PyPI only; no Debian 12 package) gives common_utils the base of
its TestCase, whose assertExpected* methods rewrite a test's source with what
it printed.  test_dataloader.py calls none of them, so unittest's TestCase
serves; a suite that did call one would fail with torch's loader too, and
run.py shows such tests as not compared.
"""
import unittest

ACCEPT = False
TestCase = unittest.TestCase
