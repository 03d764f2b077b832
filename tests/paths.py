"""Where the tests' data lives: one place for every test file, whichever folder under tests/ it stands in."""

from pathlib import Path

TESTS = Path(__file__).resolve().parent  # the tests folder
ROOT = TESTS.parent  # the repository
SRC = ROOT / "src"
FIXTURES = TESTS / "fixtures"
EXPLOITS = TESTS / "exploits"  # the exploit corpus
HONEST = TESTS / "honest"  # the honest corpus
AXPY = FIXTURES / "problems" / "axpy"
SOLUTIONS = FIXTURES / "solutions"
SCRIPTED_AGENT = TESTS / "agents" / "scripted_agent.py"  # a stand-in for an external agent's command line
