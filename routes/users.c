/* Placeholder: filled in by the organizations issue. */
#include "routes/routes.h"

void routes_users_register(void)
{
}
