"""The embedded ledger's Numscript subset: parse a program, run it.

The runtime executes exactly the `.num` programs the compiler emits, with a
hand-written parser so that a deploy host needs no parser generator. See
docs/numscript.md for the supported subset and the error codes PW751-PW757.
"""

from ._parser import parse_program
from .interpreter import allot, run_program
from .program import Posting, Program

__all__ = ["Posting", "Program", "allot", "parse_program", "run_program"]
