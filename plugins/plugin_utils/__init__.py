# -*- coding: utf-8 -*-
# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side shared code of fleetqual.storage.

Pure Python (no Ansible runtime state), so the same code serves the filters used by
the ``qualify`` role and the ``qualify_report`` callback, which imports it directly.
"""
