"""erf and erfc in float64 to ~1e-14 relative, vectorized (NumPy has none and scipy is not a dependency)."""

from __future__ import annotations

import math

import numpy as np
from numpy.polynomial import chebyshev

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_INV_SQRT_PI = 1.0 / math.sqrt(math.pi)

# |z| < 0.5: Maclaurin series erf(z) = 2/sqrt(pi) * sum (-1)^n z^(2n+1) / (n! (2n+1)); 14 terms leave < 1e-19.
_SERIES = np.array([_TWO_OVER_SQRT_PI * (-1) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(14)])
_SMALL = 0.5

# 0.5 <= z < 8: erfc(z) = exp(-z^2) * erfcx(z), with the smooth erfcx interpolated on Chebyshev points
# per interval. The coefficients are fitted once at import from the standard library's erfc.
_INTERVALS = ((0.5, 2.0), (2.0, 4.0), (4.0, 8.0))
_DEGREE = 20
_LARGE = _INTERVALS[-1][1]
# z >= 8: the asymptotic series erfcx(z) = 1/(z sqrt(pi)) sum (-1)^n (2n-1)!! / (2 z^2)^n, 20 terms < 1e-18.
_ASYMPTOTIC = np.array([(-1) ** n * math.prod(range(1, 2 * n, 2)) for n in range(20)], dtype=float)


def _exp_minus_square(z):
    """exp(-z*z) without the rounding of z*z: z = zh + zl with zh a multiple of 1/16, so zh*zh is exact."""
    if isinstance(z, float):
        zh = math.floor(z * 16.0) / 16.0
        return math.exp(-zh * zh) * math.exp(-(z - zh) * (z + zh))
    zh = np.floor(z * 16.0) / 16.0
    return np.exp(-zh * zh) * np.exp(-(z - zh) * (z + zh))


def _fit(a, b):
    def erfcx(t):
        zs = a + (b - a) * (np.atleast_1d(t) + 1.0) / 2.0
        return np.array([math.erfc(z) / _exp_minus_square(float(z)) for z in zs])

    return chebyshev.chebinterpolate(erfcx, _DEGREE)


_COEFFS = [_fit(a, b) for a, b in _INTERVALS]


def _erfcx_mid(z):
    """erfcx on [0.5, 8): the Chebyshev fit of the interval each element falls in."""
    out = np.empty_like(z)
    for (a, b), c in zip(_INTERVALS, _COEFFS):
        m = (z >= a) & (z < b)
        if m.any():
            out[m] = chebyshev.chebval((2.0 * z[m] - (a + b)) / (b - a), c)
    return out


def _erfc_pos(z):
    """erfc for z >= 0.5 (float64 array)."""
    # erfc(27) underflows to 0; clamping keeps inf from making inf - inf in the exponent split.
    z = np.minimum(z, 30.0)
    out = np.empty_like(z)
    mid = z < _LARGE
    if mid.any():
        zm = z[mid]
        out[mid] = _exp_minus_square(zm) * _erfcx_mid(zm)
    big = ~mid
    if big.any():
        zb = z[big]
        with np.errstate(over="ignore", under="ignore"):
            u = 1.0 / (2.0 * zb * zb)
            out[big] = _exp_minus_square(zb) * (_INV_SQRT_PI / zb) * np.polynomial.polynomial.polyval(u, _ASYMPTOTIC)
    return out


def _erf_small(z):
    return z * np.polynomial.polynomial.polyval(z * z, _SERIES)


def erf(x):
    """The error function, elementwise, computed in float64 and returned in x's float dtype."""
    x = np.asarray(x)
    z = x.astype(np.float64)
    out = np.empty_like(z)
    small = np.abs(z) < _SMALL
    out[small] = _erf_small(z[small])
    rest = ~small & ~np.isnan(z)
    out[rest] = np.copysign(1.0 - _erfc_pos(np.abs(z[rest])), z[rest])
    out[np.isnan(z)] = np.nan
    return out.astype(x.dtype if x.dtype.kind == "f" else np.float64, copy=False)


def erfc(x):
    """The complementary error function 1 - erf(x), accurate relative to itself in both tails."""
    x = np.asarray(x)
    z = x.astype(np.float64)
    out = np.empty_like(z)
    small = np.abs(z) < _SMALL
    out[small] = 1.0 - _erf_small(z[small])
    pos = z >= _SMALL
    out[pos] = _erfc_pos(z[pos])
    neg = z <= -_SMALL
    out[neg] = 2.0 - _erfc_pos(-z[neg])
    out[np.isnan(z)] = np.nan
    return out.astype(x.dtype if x.dtype.kind == "f" else np.float64, copy=False)
