"""Finding what is wrong with a graph: the node that faults (:func:`find_fault`, trials in a
child process) and the edges a graph lacks (:func:`find_race`)."""

from .fault import FaultReport, find_fault
from .race import RacePair, RaceReport, find_race

__all__ = ["find_fault", "FaultReport", "find_race", "RaceReport", "RacePair"]
