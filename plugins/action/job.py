# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of the detached measurement job (module ``fleetqual.storage.job``).

``state: started``: computes each workload's timeout and planned seconds from the plan
(``module_utils/plan/summary.py``, the one place of durations), the job's deadline (planned time +
data set preparation at the slowest accepted rate + ``slack``), starts the job through the
module, and writes the host's start record into the run's progress directory.

``state: wait``: polls the host's job status with a raw read over the open connection
(``job_runner.poll_command``/``parse_poll``: one SSH round trip, no Python started on the
host, no callback event) at the planned workload boundaries and at least once per
``interval`` seconds, writes the host's state into ``<progress_dir>/<host>.json``, and prints
the fleet's progress line: time is cut into rounds of ``interval`` seconds, and the poll that
first creates a round's marker file (``O_EXCL``) prints ONE line for the whole fleet from every
host's progress file. Hosts not waited on yet (forks < hosts) are running according to their
start record. When the job has ended, it returns the workloads' records (``workload_record``
of each module result) and the job's error, if any. The wait holds a fork only while it
waits: every job was started first and they run side by side, so the later hosts' waits find
their job done and return at once. A lost connection is the task's UNREACHABLE.
"""

from ansible_collections.fleetqual.storage.plugins.plugin_utils.remote.job_wait import JobAction


class ActionModule(JobAction):
    """The action ``fleetqual.storage.job`` (its module docs: plugins/modules/job.py)."""
