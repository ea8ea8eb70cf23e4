/* Placeholder: filled in by the organizations issue. */
#include "routes/routes.h"

void routes_invites_register(void)
{
}
