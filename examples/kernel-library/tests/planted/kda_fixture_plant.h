// Found by the library's `utils.cuh` only in its planted build (tests/planted.rs), whose include
// directories hold this one: it plants the bugs `utils.cuh` lists in the kernels.
#pragma once
#define KDA_FIXTURE_PLANT 1
