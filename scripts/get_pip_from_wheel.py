"""Stand-in for the pip bootstrap script ansible-test would download from its own host.

ansible-test (2.19) bootstraps pip into each sanity-test virtual environment by running
``get-pip-<version>.py`` from ``$HOME/.ansible/test/cache/get_pip_<version>.py``, which it
downloads from a host that is not a package registry. scripts/ansible-test-sanity.sh puts
this file there instead, beside the pip wheel of that version fetched from PyPI with
``pip download``. Like get-pip.py, it runs pip out of the wheel to install pip into the
interpreter running it: ``python get_pip_24_2.py [pip install options] pip==24.2
[--no-setuptools] [--no-wheel]``.

It costs less than get-pip.py, once per sanity test's venv (nine of them): pip runs from the
wheel unpacked once beside it, not from the zip archive (Python caches no bytecode for
modules imported from a zip, so each bootstrap compiled pip's modules again), and installs
pip without compiling all of its modules (``--no-compile``: the venv's Python compiles the
ones it imports, and caches them unless PYTHONDONTWRITEBYTECODE is set). Together 13 of the
venvs' 70 CPU-s, measured with PYTHONDONTWRITEBYTECODE=1 (this machine's environment).
"""

import glob
import os
import shutil
import sys
import tempfile
import zipfile

# get-pip.py's own options, which pip install does not know.
GET_PIP_ONLY = {"--no-setuptools", "--no-wheel"}


def unpacked(wheel):
    """The directory ``wheel`` is unpacked in (``<wheel>`` without ``.whl``), unpacking it
    first if needed; a concurrent bootstrap that unpacked it first wins, and this one's copy
    is removed."""
    target = wheel[:-len(".whl")]
    if not os.path.isdir(target):
        tmp = tempfile.mkdtemp(prefix=".unpack-", dir=os.path.dirname(wheel))
        try:
            with zipfile.ZipFile(wheel) as z:
                z.extractall(tmp)
            os.rename(tmp, target)
        except OSError:
            if not os.path.isdir(target):
                raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    wheels = sorted(glob.glob(os.path.join(here, "pip-*-py3-none-any.whl")))
    if not wheels:
        sys.exit("get_pip_from_wheel: no pip-*-py3-none-any.whl beside %s "
                 "(scripts/ansible-test-sanity.sh downloads it from PyPI)" % here)
    args = [arg for arg in sys.argv[1:] if arg not in GET_PIP_ONLY]
    sys.path.insert(0, unpacked(wheels[-1]))
    from pip._internal.cli.main import main as pip_main  # pylint: disable=import-outside-toplevel

    # --find-links lets pip take the wheel beside this file without downloading it again.
    return pip_main(["install", "--upgrade", "--force-reinstall", "--no-compile", "--find-links", here] + args)


if __name__ == "__main__":
    sys.exit(main())
