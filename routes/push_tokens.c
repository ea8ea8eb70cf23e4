/* Placeholder: filled in by the organizations issue. */
#include "routes/routes.h"

void routes_push_tokens_register(void)
{
}
