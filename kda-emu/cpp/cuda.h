// <cuda.h> of the emulator: the device API comes from kda_emu.h.
#pragma once
#include "kda_emu.h"
