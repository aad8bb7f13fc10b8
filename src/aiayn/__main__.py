from aiayn.cli import run

run()
