"""The runtime: activate signed bundles, open agreements and run commands on them.

Imports only the kernel (`pactwright/*.py`) and its own modules.
"""

from pactwright.runtime.agreements import AgreementView, open_agreement, show
from pactwright.runtime.clock import FileClock, FixedClock, SystemClock, TestClock
from pactwright.runtime.commands import SubmitResult, payload_digest, submit
from pactwright.runtime.evidence import EvidenceReport, evidence, verify_evidence
from pactwright.runtime.ledger_api import Ledger, Posting
from pactwright.runtime.ledger_db import DurableLedger, open_ledger
from pactwright.runtime.scheduler import ScanResult
from pactwright.runtime.scheduler import scan as scan_deadlines
from pactwright.runtime.worker import Outcome, Worker

__all__ = [
    "AgreementView",
    "DurableLedger",
    "EvidenceReport",
    "FileClock",
    "FixedClock",
    "Ledger",
    "Outcome",
    "Posting",
    "ScanResult",
    "SubmitResult",
    "SystemClock",
    "TestClock",
    "Worker",
    "evidence",
    "open_agreement",
    "open_ledger",
    "payload_digest",
    "scan_deadlines",
    "show",
    "submit",
    "verify_evidence",
]
