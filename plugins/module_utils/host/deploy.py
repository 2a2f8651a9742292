# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The benchmark binary on the host: is it the controller's build, and installing it.

The deploy is part of the module run that starts the job. The action sends the
sha256 of the controller's build; when the host's binary has it, nothing is transferred.
Otherwise the module says so and changes nothing; the action transfers the build to the
module's temporary directory and runs the module again with ``binary_src``: the copy is
installed only when ITS sha256 is the controller's (a corrupt or altered transfer is
refused), by a rename in the binary's own directory, so a reader sees the old binary or the
new one, never half of one, and two runs deploying to one host at once (two inventory names
of one machine) each install a whole copy.
"""

import hashlib
import os
import shutil
import tempfile


class DeployError(Exception):
    pass


def sha256_file(path):
    """Hex sha256 of a file, None when it cannot be read."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    except (IOError, OSError):
        return None
    return h.hexdigest()


def install(src, binary, want, check_mode=False):
    """Install ``src`` as ``binary`` (mode 0755, its directory created 0755) when its
    sha256 is ``want``. Raises :class:`DeployError` naming both checksums otherwise."""
    got = sha256_file(src)
    if got != want:
        raise DeployError("the copy of iobench has sha256 %s, the controller built %s: the transfer is corrupt "
                          "or was altered; %s was left as it was" % (got or "unreadable", want, binary))
    if check_mode:
        return
    directory = os.path.dirname(binary) or "."
    if not os.path.isdir(directory):
        # exist_ok: two runs deploying to one host at once (two inventory names of one machine)
        os.makedirs(directory, 0o755, exist_ok=True)
    tmp = None
    try:
        # a name of its own (mkstemp): two installs at once never write the same file
        fd, tmp = tempfile.mkstemp(prefix=".%s.fleetqual-" % os.path.basename(binary), dir=directory)
        os.close(fd)
        shutil.copyfile(src, tmp)
        os.chmod(tmp, 0o755)
        if sha256_file(tmp) != want:
            raise DeployError("the installed copy of iobench at %s does not have the controller's sha256 %s "
                              "(a full or failing disk?)" % (tmp, want))
        os.rename(tmp, binary)
    except (IOError, OSError) as exc:
        raise DeployError("could not install iobench as %s: %s" % (binary, exc))
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
