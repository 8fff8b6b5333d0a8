#include "layers/tokens_layer.h"

// Declarations only: the layer is its header.
