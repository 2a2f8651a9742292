"""Stand-in for the pip bootstrap script ansible-test would download from its own host.

ansible-test (2.19) bootstraps pip into each sanity-test virtual environment by running
``get-pip-<version>.py`` from ``$HOME/.ansible/test/cache/get_pip_<version>.py``, which it
downloads from a host that is not a package registry. scripts/ansible-test-sanity.sh puts
this file there instead, beside the pip wheel of that version fetched from PyPI with
``pip download``. Like get-pip.py, it runs pip from the wheel itself to install pip into the
interpreter running it: ``python get_pip_24_2.py [pip install options] pip==24.2
[--no-setuptools] [--no-wheel]``.
"""

import glob
import os
import sys

# get-pip.py's own options, which pip install does not know.
GET_PIP_ONLY = {"--no-setuptools", "--no-wheel"}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    wheels = sorted(glob.glob(os.path.join(here, "pip-*-py3-none-any.whl")))
    if not wheels:
        sys.exit("get_pip_from_wheel: no pip-*-py3-none-any.whl beside %s "
                 "(scripts/ansible-test-sanity.sh downloads it from PyPI)" % here)
    args = [arg for arg in sys.argv[1:] if arg not in GET_PIP_ONLY]
    # A wheel is a zip archive that Python can import from: run pip out of it, as get-pip.py does.
    sys.path.insert(0, wheels[-1])
    from pip._internal.cli.main import main as pip_main  # pylint: disable=import-outside-toplevel

    # --find-links lets pip take the wheel beside this file without downloading it again.
    return pip_main(["install", "--upgrade", "--force-reinstall", "--find-links", here] + args)


if __name__ == "__main__":
    sys.exit(main())
