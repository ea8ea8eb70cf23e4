/* Placeholder: filled in by the organizations issue. */
#include "routes/routes.h"

void routes_organizations_register(void)
{
}
