/*
 * sigv4_cli: prints the URL domain/sigv4 presigns for the inputs given as name=value arguments
 * (method endpoint region bucket key access secret date expires path_style content_type
 * content_length disposition response_type sha256_param if_none_match). tests/api/test_sigv4_sdk.py
 * compares its output with the AWS SDK's presigner for the same inputs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "domain/sigv4.h"

int main(int argc, char **argv)
{
    sigv4_presign_t p = {0};
    for (int i = 1; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq) return 2;
        *eq = '\0';
        const char *k = argv[i], *v = eq + 1;
        if (strcmp(k, "method") == 0)
            p.method = v;
        else if (strcmp(k, "endpoint") == 0)
            p.endpoint = v;
        else if (strcmp(k, "region") == 0)
            p.region = v;
        else if (strcmp(k, "bucket") == 0)
            p.bucket = v;
        else if (strcmp(k, "key") == 0)
            p.key = v;
        else if (strcmp(k, "access") == 0)
            p.access_key = v;
        else if (strcmp(k, "secret") == 0)
            p.secret_key = v;
        else if (strcmp(k, "date") == 0)
            p.amz_date = v;
        else if (strcmp(k, "expires") == 0)
            p.expires = (uint32_t)strtoul(v, NULL, 10);
        else if (strcmp(k, "path_style") == 0)
            p.path_style = strcmp(v, "1") == 0;
        else if (strcmp(k, "content_type") == 0)
            p.content_type = v;
        else if (strcmp(k, "content_length") == 0) {
            p.sign_length = true;
            p.content_length = strtoull(v, NULL, 10);
        } else if (strcmp(k, "disposition") == 0)
            p.response_content_disposition = v;
        else if (strcmp(k, "response_type") == 0)
            p.response_content_type = v;
        else if (strcmp(k, "sha256_param") == 0)
            p.query_content_sha256 = strcmp(v, "1") == 0;
        else if (strcmp(k, "if_none_match") == 0 && strcmp(v, "*") == 0)
            p.if_none_match_any = true;
        else
            return 2;
    }
    char *url = NULL;
    if (sigv4_presign_url(&p, &url) != 0) return 1;
    puts(url);
    free(url);
    return 0;
}
