# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one reader of iobench's JSON: a workload record's flat metrics (workload, with every
key in its docstring), the device's own figures and the foreign I/O beside it (device), data
verification and I/O errors (integrity), the run's shape over time (stability) and its
stalls (stalls). Every later stage reads the record's metrics, never the raw JSON.

May import: module_utils; plugin_utils: common.
"""
