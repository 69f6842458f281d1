"""GET /api/calculator: the memory calculator (app/calculator.py) over HTTP; bad input is a 422 naming the
field and its bound.

Owns: the route. Imports app.calculator.
"""

from typing import Annotated

from fastapi import APIRouter, Query

from app.calculator import CalculatorParams, CalculatorResult, calculate

router = APIRouter(prefix="/api", tags=["calculator"])


@router.get("/calculator", response_model=CalculatorResult,
            summary="Per-GPU memory by role (REFERENCE.md's formulas) against 80 GB and 141 GB")
def calculator(params: Annotated[CalculatorParams, Query()]) -> CalculatorResult:
    return calculate(params)
