// The C ABI's record of facts (esg_facts): a snapshot of a model's runtime::Facts, made by
// esg_model_facts (model_api.cpp) and read by esg_facts_* (facts_api.cpp).
#pragma once
#include "esgraph/c/esgraph.h"
#include "runtime/facts.hpp"

namespace esg::capi {
esg_facts* make_facts(runtime::Facts facts);  // owned by the caller: esg_facts_free
}  // namespace esg::capi
