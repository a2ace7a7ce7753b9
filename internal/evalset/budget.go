package evalset

// DefaultBudgetMaxTokens is the max_tokens --budget assumes for a model call
// that names none (model.budget_max_tokens unset): the gateway holds that
// many output tokens' cost before the call is sent, so that calls in flight
// cannot overspend the budget together. Raise it for models that answer
// longer without a cap; lower it when calls are short and the default holds
// back too much of a small budget.
const DefaultBudgetMaxTokens = 4096

// MaxBudgetMaxTokens bounds model.budget_max_tokens.
const MaxBudgetMaxTokens = 10_000_000
