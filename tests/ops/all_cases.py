"""Every OpCase list in one place: the op-parametrized tests (gradients, aliasing, coverage) run them all."""

from __future__ import annotations

from ops.cases_ccl import CASES as CCL_CASES
from ops.cases_core import CASES as CORE_CASES
from ops.cases_data_dependent import CASES as DATA_DEPENDENT_CASES
from ops.cases_math import CASES as MATH_CASES
from ops.cases_nn import CASES as NN_CASES
from ops.cases_shape_values import CASES as SHAPE_VALUE_CASES

ALL_CASES = CORE_CASES + NN_CASES + MATH_CASES + CCL_CASES + SHAPE_VALUE_CASES + DATA_DEPENDENT_CASES
