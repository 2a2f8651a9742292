# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Small controller-side helpers every other package uses: plain JSON values, rounding and
natural sort (plain), small statistics (stats), number formats (fmt) and iobench's latency
histogram with exact merges (histogram).

May import: module_utils.
"""
