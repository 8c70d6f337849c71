"""Finding what is wrong with a graph: the node that faults (:func:`find_fault`, trials in a
child process), the edges a graph lacks (:func:`find_race`), and every call of a function
that would break a capture (:func:`doctor`)."""

from .fault import FaultReport, find_fault
from .race import RacePair, RaceReport, find_race
from .doctor_run import DoctorReport, DoctorUnavailable, Problem, doctor

__all__ = ["find_fault", "FaultReport", "find_race", "RaceReport", "RacePair", "doctor",
           "DoctorReport", "Problem", "DoctorUnavailable"]
