# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The smallest helpers of both sides: the one atomic file writer (atomic), the finite-number
predicates and the human number (numeric), the one size parser (size).

May import: nothing of this collection.
"""
