//===- TargetHooks.cpp - What each code-generating target spells ----------===//

#include "pcc/Target/TargetHooks.h"

using namespace pcc;

// Out of line, so that the vtable has one home.
TargetHooks::~TargetHooks() = default;
