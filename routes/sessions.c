/* Placeholder: filled in by the mentorships issue. */
#include "routes/routes.h"

void routes_sessions_register(void)
{
}
